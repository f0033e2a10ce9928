//! `causeway` — runs scenario files on CPU and Vulkan queues and shows how causality flowed.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use causeway_cli::output::{self, Stdout};
use causeway_cli::view;
use causeway_scenario::bundled::Source;
use causeway_scenario::check::Plan;
use causeway_scenario::ranks::{World, HOST_RANK};
use causeway_scenario::run::{Outcome, RunOptions};
use causeway_scenario::{
    bundled, check, expect, parse, report, run, summary, trace, Scenario, ScenarioError,
};
use clap::{Parser, Subcommand};

/// Exit status when the scenario's own expectations were not met.
const EXIT_EXPECTATIONS: u8 = 1;
/// Exit status for unreadable or invalid input.
const EXIT_INPUT: u8 = 2;
/// Exit status when the workload can never finish.
const EXIT_DEADLOCK: u8 = 3;

#[derive(Parser)]
#[command(
    name = "causeway",
    version,
    about = "Run causeway scenarios and show how causality flowed"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario file (or a bundled scenario by name).
    Run {
        /// The scenario: a TOML file, or the bare name of a bundled one (see `causeway
        /// scenarios`).
        file: PathBuf,
        /// Write the machine-readable report here.
        #[arg(long, value_name = "OUT.json")]
        report: Option<PathBuf>,
        /// Write a Chrome/Perfetto trace here.
        #[arg(long, value_name = "OUT.json")]
        trace: Option<PathBuf>,
        /// Write the interactive HTML view of the run here (one file; it loads nothing).
        #[arg(long, value_name = "OUT.html")]
        html: Option<PathBuf>,
        /// Give up and report what is stuck after this many seconds.
        #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
        timeout: f64,
        /// Print only the expectation verdict.
        #[arg(long)]
        quiet: bool,
        /// Run every queue on the CPU driver, whatever driver it names (for a machine without
        /// Vulkan: the causality is the same, the work runs on the worker pool).
        #[arg(long)]
        all_cpu: bool,
    },
    /// List the bundled scenarios.
    Scenarios,
    /// Turn a saved `--report` into the interactive HTML view of its run.
    View {
        /// The report (`causeway run FILE --report REPORT.json`).
        report: PathBuf,
        /// Write the page here.
        #[arg(short, long, value_name = "OUT.html")]
        output: PathBuf,
        /// The run's Perfetto trace, for the page to link to (as written, relative to the page).
        #[arg(long, value_name = "TRACE.json")]
        trace: Option<String>,
    },
    /// Schedule a graph file onto streams; print the streams and the signals beside a naive
    /// schedule's, and optionally write a scenario that runs it.
    Schedule {
        /// The graph: a TOML file of devices and nodes (see docs/src/scheduling.md), or the bare name of
        /// a bundled one (fork-join, transformer-block, multi-device-pipeline, while-refine).
        graph: PathBuf,
        /// Write the schedule as a scenario `causeway run` executes.
        #[arg(long, value_name = "SCENARIO.toml")]
        emit: Option<PathBuf>,
        /// Run the graph here, `while` and `case` blocks as coroutines, and check that every
        /// dependency of every iteration was honoured.
        #[arg(long, conflicts_with = "emit")]
        run: bool,
        /// With `--run`: give up and report what is still going after this many seconds.
        #[arg(long, default_value_t = 60.0, value_name = "SECONDS", requires = "run")]
        timeout: f64,
    },
}

/// The command's exit status, unless its text could not be written (exit 2).
fn main() -> ExitCode {
    let mut out = Stdout::new();
    let code = run_command(Cli::parse().command, &mut out);
    match out.finish() {
        Ok(()) => code,
        Err(error) => {
            output::error(format_args!("cannot write to standard output: {error}"));
            ExitCode::from(EXIT_INPUT)
        }
    }
}

fn run_command(command: Command, out: &mut Stdout) -> ExitCode {
    match command {
        Command::Scenarios => {
            for scenario in bundled::ALL {
                out.line(format_args!("{:<24} {}", scenario.name, scenario.summary()));
            }
            ExitCode::SUCCESS
        }
        Command::View { report, output, trace } => {
            view_report(&report, &output, trace.as_deref(), out)
        }
        Command::Schedule { graph, emit, run, timeout } => {
            let Some(timeout) = positive_seconds(timeout) else { return bad_timeout() };
            schedule_graph(&graph, emit.as_deref(), run.then_some(timeout), out)
        }
        Command::Run { file, report, trace, html, timeout, quiet, all_cpu } => {
            let Some(timeout) = positive_seconds(timeout) else { return bad_timeout() };
            let options = RunOptions { timeout, progress: !quiet, all_cpu };
            let documents = Documents {
                report: report.as_deref(),
                trace: trace.as_deref(),
                html: html.as_deref(),
            };
            run_scenario(&file, documents, options, out)
        }
    }
}

/// `seconds` as a duration, when it is a positive number of seconds.
fn positive_seconds(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok().filter(|duration| !duration.is_zero())
}

fn bad_timeout() -> ExitCode {
    output::error("--timeout must be a positive number of seconds");
    ExitCode::from(EXIT_INPUT)
}

/// `causeway schedule`: prints the schedule, then emits its scenario or, with `run` (the
/// timeout of `--run`), runs it.
fn schedule_graph(
    path: &Path,
    emit: Option<&Path>,
    run: Option<Duration>,
    out: &mut Stdout,
) -> ExitCode {
    let loaded = bundled::resolve(path, bundled::GRAPH).and_then(|source| match source {
        Source::File(path) => causeway_cli::schedule::load(path),
        Source::Bundled(found) => {
            causeway_cli::schedule::parse(Path::new(found.name), found.source)
        }
    });
    let file = match loaded {
        Ok(file) => file,
        Err(error) => {
            refuse(&error);
            return ExitCode::from(EXIT_INPUT);
        }
    };
    let schedule = causeway_schedule::schedule(&file.program.graph);
    out.print(causeway_cli::schedule::render(&file, &schedule));
    if let Some(timeout) = run {
        return causeway_cli::schedule::run_and_check(&file, timeout, out);
    }
    if let Some(emitted) = emit {
        let scenario = match causeway_cli::schedule::emit(&file, &schedule) {
            Ok(scenario) => scenario,
            Err(error) => {
                refuse(&error);
                return ExitCode::from(EXIT_INPUT);
            }
        };
        if let Err(error) = std::fs::write(emitted, scenario) {
            output::error(format_args!("cannot write {}: {error}", emitted.display()));
            return ExitCode::from(EXIT_INPUT);
        }
        out.line(format_args!("scenario written to {}", emitted.display()));
    }
    ExitCode::SUCCESS
}

fn load(file: &Path) -> Result<Scenario, ScenarioError> {
    match bundled::resolve(file, bundled::SCENARIO)? {
        Source::File(path) => parse::load(path),
        Source::Bundled(found) => found.scenario(),
    }
}

/// Writes each of `error`'s problems as an error line of its own.
fn refuse(error: &ScenarioError) {
    for problem in error.problems() {
        output::error(problem);
    }
}

/// Streams one JSON document of the run to a file.
type DocumentWriter<'a> = dyn Fn(&mut BufWriter<File>) -> io::Result<()> + 'a;

/// Where `causeway run` writes what it was asked for.
#[derive(Clone, Copy)]
struct Documents<'a> {
    report: Option<&'a Path>,
    trace: Option<&'a Path>,
    html: Option<&'a Path>,
}

fn run_scenario(
    file: &Path,
    documents: Documents<'_>,
    mut options: RunOptions,
    out: &mut Stdout,
) -> ExitCode {
    let world = match World::from_env(|name| std::env::var(name).ok()) {
        Ok(world) => world,
        Err(error) => {
            output::error(&error);
            return ExitCode::from(EXIT_INPUT);
        }
    };
    // Under mpirun every rank loads and checks the same file: rank 0 alone reports what it
    // finds, and the run.
    let reports = world.is_none_or(|world| world.rank == HOST_RANK);
    options.progress &= reports;
    let failed = |error: ScenarioError| {
        if reports {
            refuse(&error);
        }
        ExitCode::from(if error.deadlock { EXIT_DEADLOCK } else { EXIT_INPUT })
    };
    let (scenario, plan) = match load(file).and_then(|s| check::check(&s).map(|plan| (s, plan))) {
        Ok(checked) => checked,
        Err(error) => return failed(error),
    };
    match world {
        Some(world) if world.size > 1 => match run_across(&scenario, &plan, options, world) {
            // MPI is finalised once rank 0 has reported (the session drops last).
            Ok((Some(outcome), _session)) => present(&outcome, documents, options, out),
            Ok((None, _session)) => ExitCode::SUCCESS,
            Err(code) => code,
        },
        _ => match run::run(&scenario, &plan, options) {
            Ok(outcome) => present(&outcome, documents, options, out),
            Err(error) => failed(error),
        },
    }
}

/// What keeps a run across ranks joined until it is reported.
#[cfg(feature = "mpi")]
type Session = causeway_scenario::mpi_run::Session;
/// Without the `mpi` feature there is nothing to keep.
#[cfg(not(feature = "mpi"))]
type Session = ();

/// Runs this rank's share of a scenario across the ranks `mpirun` started; rank 0 gets the
/// whole run's outcome, the others `None` once their records are sent, each with the session
/// to keep until the run is reported. `Err` is the exit status, after the errors were printed
/// (every rank's on rank 0).
#[cfg(feature = "mpi")]
fn run_across<'s>(
    scenario: &'s Scenario,
    plan: &Plan,
    options: RunOptions,
    world: World,
) -> Result<(Option<Outcome<'s>>, Session), ExitCode> {
    use causeway_scenario::mpi_run::{self, Ended};
    use causeway_scenario::ranks::Share;
    let share = Share::new(scenario, world).map_err(|error| {
        if world.rank == HOST_RANK {
            refuse(&error);
        }
        ExitCode::from(EXIT_INPUT)
    })?;
    let (ended, session) = mpi_run::run(scenario, plan, options, &share);
    match ended {
        Ok(Ended::Gathered(outcome)) => Ok((Some(*outcome), session)),
        Ok(Ended::Sent) => Ok((None, session)),
        Err(errors) => {
            // One write for every rank's error, so that no output of another rank, forwarded
            // by `mpirun` to the same stream, comes between its lines.
            let report: String = errors
                .iter()
                .map(|error| format!("error: rank {}: {}\n", error.rank, error.message))
                .collect();
            // Nothing is left to tell if stderr itself is gone.
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), report.as_bytes());
            let deadlock = errors.iter().any(|error| error.deadlock);
            Err(ExitCode::from(if deadlock { EXIT_DEADLOCK } else { EXIT_INPUT }))
        }
    }
}

/// Without the `mpi` feature a run across ranks is refused (exit 2), naming the feature.
#[cfg(not(feature = "mpi"))]
fn run_across<'s>(
    _scenario: &'s Scenario,
    _plan: &Plan,
    _options: RunOptions,
    world: World,
) -> Result<(Option<Outcome<'s>>, Session), ExitCode> {
    if world.rank == HOST_RANK {
        output::error(format_args!(
            "this causeway was built without the `mpi` feature, so it cannot run as one \
             of {} MPI ranks: build it with `cargo build --release -p causeway-cli --features \
             mpi` (Open MPI's headers and libclang are needed: scripts/mpi.sh --setup-only)",
            world.size
        ));
    }
    Err(ExitCode::from(EXIT_INPUT))
}

/// Prints the summary, writes the documents asked for and checks the scenario's expectations
/// (a run stopped at its deadline exits 3 instead, after saying what was stuck).
fn present(
    outcome: &Outcome<'_>,
    documents: Documents<'_>,
    options: RunOptions,
    out: &mut Stdout,
) -> ExitCode {
    let Documents { report: report_path, trace: trace_path, html: html_path } = documents;
    if options.progress {
        out.print(summary::summary(outcome));
    }
    let trace_link = html_path.zip(trace_path).map(|(html, trace)| view_link(html, trace));
    let page = |out: &mut BufWriter<File>| {
        let mut json = Vec::new();
        report::write(outcome, &mut json)?;
        let links = view::PageLinks { trace: trace_link.as_deref() };
        view::write(&json, links, out).map_err(io::Error::other)
    };
    let documents: [(Option<&Path>, &DocumentWriter); 3] = [
        (report_path, &|out| report::write(outcome, out)),
        (trace_path, &|out| trace::write(outcome, out)),
        (html_path, &page),
    ];
    for (path, write) in documents {
        let Some(path) = path else { continue };
        let written = File::create(path).map(BufWriter::new).and_then(|mut out| {
            write(&mut out)?;
            out.flush()
        });
        if let Err(error) = written {
            output::error(format_args!("cannot write {}: {error}", path.display()));
            return ExitCode::from(EXIT_INPUT);
        }
    }
    if let Some(timed_out) = &outcome.timed_out {
        // The documents above hold what was known at the deadline; expectations of a run cut
        // short would only restate it.
        out.line(format_args!("expectations: not checked (the run was stopped at its deadline)"));
        output::error(&timed_out.error);
        return ExitCode::from(EXIT_DEADLOCK);
    }
    let (unmet, checked) = expect::unmet(outcome);
    if unmet.is_empty() {
        out.line(format_args!("expectations: {checked} checked, all met"));
        ExitCode::SUCCESS
    } else {
        out.line(format_args!("expectations: {} of {checked} NOT met", unmet.len()));
        for line in &unmet {
            out.line(format_args!("  {line}"));
        }
        ExitCode::from(EXIT_EXPECTATIONS)
    }
}

/// The trace as the page at `html` should link to it: by file name when they share a folder,
/// else by the path as given on the command line.
fn view_link(html: &Path, trace: &Path) -> String {
    let folder = |path: &Path| path.parent().map(Path::to_path_buf).unwrap_or_default();
    match trace.file_name() {
        Some(name) if folder(html) == folder(trace) => name.to_string_lossy().into_owned(),
        _ => trace.to_string_lossy().into_owned(),
    }
}

fn view_report(report: &Path, output: &Path, trace: Option<&str>, out: &mut Stdout) -> ExitCode {
    let json = match std::fs::read(report) {
        Ok(json) => json,
        Err(error) => {
            output::error(format_args!("cannot read {}: {error}", report.display()));
            return ExitCode::from(EXIT_INPUT);
        }
    };
    if let Err(error) = view::check(&json) {
        output::error(format_args!("{}: {error}", report.display()));
        return ExitCode::from(EXIT_INPUT);
    }
    let written = File::create(output).map(BufWriter::new).and_then(|mut page| {
        view::write(&json, view::PageLinks { trace }, &mut page).map_err(io::Error::other)?;
        page.flush()
    });
    match written {
        Ok(()) => {
            out.line(format_args!("view written to {}", output.display()));
            ExitCode::SUCCESS
        }
        Err(error) => {
            output::error(format_args!("cannot write {}: {error}", output.display()));
            ExitCode::from(EXIT_INPUT)
        }
    }
}
