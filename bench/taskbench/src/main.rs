//! Runs Task Bench's METG sweep for causeway and its peers and writes the results.
//!
//! `cargo run --release -p causeway-taskbench -- [options]`; `--help` lists them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use causeway_taskbench::pattern::Pattern;
use causeway_taskbench::report::{case_svg, metg_summary, metg_table, points_csv, waits_table};
use causeway_taskbench::sweep::{run_sweep, SweepConfig};
use causeway_taskbench::systems::outside::OutsidePeer;
use causeway_taskbench::systems::{Limits, System};
use causeway_taskbench::TaskBenchError;

const USAGE: &str = "\
usage: causeway-taskbench [options]

  --patterns LIST      comma-separated patterns (default: trivial,no_comm,stencil_1d,fft,tree,
                       nearest_3,nearest_5,spread_3,all_to_all)
  --widths LIST        graph widths (default: the worker count and 8)
  --steps N            timesteps per graph at most (default 1000)
  --work N             kernel iterations per run in all, which sets a graph's timesteps
                       between 32 and --steps (default 4194304)
  --systems LIST       executor,executor_prebuilt,queues,rayon,tokio,threads (default: all)
  --blocks N           alternating blocks (default 3)
  --repeats N          runs per point, the fastest counting (default 5)
  --max-iterations N   kernel iterations per task at the start of the sweep (default 32768)
  --min-iterations N   ... at its end, halving from the start (default 4)
  --workers N          worker threads per system (default: the machine's cores)
  --max-queues N       most queues the queues variant may create (default 64)
  --peer NAME=PATH     also run an outside peer built by scripts/taskbench_peers.sh, in the
                       same blocks: NAME is openmp, mpi (run with mpirun -n WORKERS) or
                       taskflow; repeat the option for each (default: none)
  --out DIR            where the table and plots go (default target/taskbench)
";

struct Options {
    config: SweepConfig,
    out: PathBuf,
}

fn list<T: FromStr<Err = TaskBenchError>>(value: &str) -> Result<Vec<T>, TaskBenchError> {
    value.split(',').map(str::parse).collect()
}

fn number<T: FromStr>(flag: &str, value: &str) -> Result<T, TaskBenchError> {
    value.parse().map_err(|_| TaskBenchError::BadArgument {
        reason: format!("{flag} takes a non-negative integer, not {value:?}"),
    })
}

fn parse(arguments: impl Iterator<Item = String>) -> Result<Option<Options>, TaskBenchError> {
    let workers = std::thread::available_parallelism().map_or(2, |cores| cores.get());
    let mut config = SweepConfig {
        patterns: Pattern::STANDARD.to_vec(),
        widths: vec![workers as u32, 8],
        steps: 1000,
        work_per_run: 1 << 22,
        systems: System::ALL.to_vec(),
        blocks: 3,
        repeats: 5,
        max_iterations: 1 << 15,
        min_iterations: 4,
        limits: Limits { workers, max_queues: 64, outside: Vec::new() },
    };
    let mut widths_given = false;
    let mut out = PathBuf::from("target/taskbench");
    let mut arguments = arguments.peekable();
    while let Some(flag) = arguments.next() {
        if flag == "--help" || flag == "-h" {
            return Ok(None);
        }
        let value = arguments.next().ok_or_else(|| TaskBenchError::BadArgument {
            reason: format!("{flag} needs a value (see --help)"),
        })?;
        match flag.as_str() {
            "--patterns" => config.patterns = list(&value)?,
            "--widths" => {
                config.widths = value
                    .split(',')
                    .map(|width| number("--widths", width))
                    .collect::<Result<_, _>>()?;
                widths_given = true;
            }
            "--steps" => config.steps = number(&flag, &value)?,
            "--work" => config.work_per_run = number(&flag, &value)?,
            "--systems" => config.systems = list(&value)?,
            "--blocks" => config.blocks = number(&flag, &value)?,
            "--repeats" => config.repeats = number(&flag, &value)?,
            "--max-iterations" => config.max_iterations = number(&flag, &value)?,
            "--min-iterations" => config.min_iterations = number(&flag, &value)?,
            "--workers" => config.limits.workers = number(&flag, &value)?,
            "--max-queues" => config.limits.max_queues = number(&flag, &value)?,
            "--peer" => {
                let peer: OutsidePeer = value.parse()?;
                if config.limits.peer(peer.kind).is_ok() {
                    return Err(TaskBenchError::BadPeer {
                        spec: value,
                        reason: format!("{} given twice", peer.kind),
                    });
                }
                config.limits.outside.push(peer);
            }
            "--out" => out = PathBuf::from(value),
            _ => {
                return Err(TaskBenchError::BadArgument {
                    reason: format!("unknown option {flag} (see --help)"),
                })
            }
        }
    }
    // The outside peers after the harness's own systems, in the order given.
    config.systems.extend(config.limits.outside.iter().map(|peer| System::Outside(peer.kind)));
    if !widths_given {
        config.widths = vec![config.limits.workers as u32, 8];
        config.widths.dedup();
    }
    Ok(Some(Options { config, out }))
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("causeway-taskbench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match run_sweep(&options.config, |step| eprintln!("causeway-taskbench: {step}")) {
        Ok(result) => result,
        Err(error) => {
            eprintln!("causeway-taskbench: FAILED: {error}");
            return ExitCode::FAILURE;
        }
    };
    let config = &options.config;
    let mut text = format!(
        "Task Bench METG(50 %): {} workers, {} kernel iterations per run in 32 to {} steps, \
         kernel iterations per task {} down to {} (halving), {} alternating blocks, fastest of {} runs per point; peak per block (kernel iterations/s): {}{}\n\n",
        config.limits.workers,
        config.work_per_run,
        config.steps,
        config.max_iterations,
        config.min_iterations,
        config.blocks,
        config.repeats,
        result.peaks.iter().map(|peak| format!("{peak:.3e}")).collect::<Vec<_>>().join(", "),
        outside_peaks(&result.outside_peaks, &config.limits.outside)
    );
    text.push_str(
        "METG(50 %) in µs of core time per task, median over blocks (range); — where no block \
         reached 50 %:\n\n",
    );
    text.push_str(&metg_summary(&result));
    text.push_str("\nPer system, with the blocks that reached 50 %:\n\n");
    text.push_str(&metg_table(&result));
    text.push_str("\nQueues variant, waits of one run (the last block's, fewest iterations):\n\n");
    text.push_str(&waits_table(&result));
    print!("{text}");
    if let Err(error) = write_files(&options.out, &text, &result) {
        eprintln!("causeway-taskbench: writing {}: {error}", options.out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("causeway-taskbench: table and plots in {}", options.out.display());
    ExitCode::SUCCESS
}

/// The outside peers' programs and their kernel's peaks, for the table's heading.
fn outside_peaks(peaks: &[f64], peers: &[OutsidePeer]) -> String {
    if peers.is_empty() {
        return String::new();
    }
    let programs: Vec<String> =
        peers.iter().map(|peer| format!("{} {}", peer.kind, peer.binary.display())).collect();
    format!(
        "; outside peers ({}) rated against Task Bench's kernel, peak per block (its iterations/s): {}",
        programs.join(", "),
        peaks.iter().map(|peak| format!("{peak:.3e}")).collect::<Vec<_>>().join(", ")
    )
}

fn write_files(
    out: &std::path::Path,
    text: &str,
    result: &causeway_taskbench::sweep::SweepResult,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("metg.md"), text)?;
    std::fs::write(out.join("points.csv"), points_csv(result))?;
    for case in &result.cases {
        let name = format!("{}-w{}.svg", case.pattern, case.width);
        std::fs::write(out.join(name), case_svg(case))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_taskbench::systems::outside::OutsideKind;

    fn arguments(line: &str) -> impl Iterator<Item = String> + '_ {
        line.split_whitespace().map(str::to_owned)
    }

    #[test]
    fn peers_join_the_systems_after_the_harness_s_own() {
        let program = std::env::current_exe().expect("the test's own program");
        let line = format!("--systems rayon --peer mpi={0} --peer taskflow={0}", program.display());
        let options = parse(arguments(&line)).expect("parses").expect("not --help");
        assert_eq!(
            options.config.systems,
            [
                System::Rayon,
                System::Outside(OutsideKind::Mpi),
                System::Outside(OutsideKind::Taskflow)
            ]
        );
        assert_eq!(options.config.limits.outside.len(), 2);
        let without = parse(arguments("--systems rayon")).expect("parses").expect("not --help");
        assert_eq!(without.config.systems, [System::Rayon]);
    }

    #[test]
    fn bad_peer_arguments_are_refused() {
        let program = std::env::current_exe().expect("the test's own program");
        let refused =
            |line: &str| matches!(parse(arguments(line)), Err(TaskBenchError::BadPeer { .. }));
        assert!(refused("--peer openmp"));
        assert!(refused("--peer legion=/bin/sh"));
        assert!(refused("--peer openmp=/nonexistent/openmp/main"));
        assert!(refused(&format!("--peer mpi={0} --peer mpi={0}", program.display())));
        assert!(matches!(parse(arguments("--peer")), Err(TaskBenchError::BadArgument { .. })));
    }
}
