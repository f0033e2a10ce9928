//! The MPI tier: real Open MPI, real ranks on loopback.
//!
//! Run by `cargo test` as an ordinary test binary (no harness), this program launches itself
//! under `mpirun --oversubscribe -n N` once per case, each run under `timeout`, and checks
//! what every rank printed. Launched by `mpirun` (Open MPI sets `OMPI_COMM_WORLD_RANK`), it is
//! one rank of the named case instead. A missing `mpirun` is a failure, not a skip:
//! `scripts/mpi.sh` installs it.
//!
//! Cases:
//! - `relay` (2 and 4 ranks): 10^5 operations in all, in rounds along a chain of ranks; rank
//!   r's queue waits on rank r-1's semaphore and signals its own. Every rank submits each round as soon as the
//!   previous rank has *announced* it (one message, no round trip), and its operation's
//!   frontier then holds every earlier rank's queue at that round — ranks it never heard from.
//!   A late wait on an imported value reached long ago finds the signal that first reached
//!   it (the late-waiter rule, across ranks); once idle, the progress process stays parked.
//! - `failure` (4 ranks): a host function fails on rank 1; its semaphore fails on ranks 0 and
//!   3, together with the operations there that wait on it, and nothing hangs.
//! - `malformed` (2 ranks): rank 1 sends truncated and malformed bytes; the semaphores they
//!   name fail on rank 0 with typed reasons, and nothing panics.
//! - `killed` (4 ranks): rank 2 is killed (SIGKILL) while the others wait on it; the run ends
//!   well within the timeout. Run twice: by default Open MPI's mpirun tears the job down when
//!   a rank dies; with `--enable-recovery` it lets the survivors run, and each gives up at its
//!   own wait's timeout (10 s), its semaphore failed as device-lost.

use std::mem::ManuallyDrop;
use std::process::{Command, ExitCode};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use causeway_core::axis::Domain;
use causeway_core::scope::{Endpoint, Scope};
use causeway_core::semaphore::{Failure, Lookup};
use causeway_device::{Device, Op, QueueConfig, QueueId, SemaphoreConfig, SemaphoreId, Work};
use causeway_distributed::{
    HostWaitError, LinkId, Links, Message, MessageError, Node, RemoteError, MAX_MESSAGE_LEN,
};
use causeway_driver_cpu::CpuBackend;
use causeway_runtime::{blocking, PoolConfig};

#[path = "../../tests/support/mod.rs"]
mod support;

/// Operations the relay submits across all its ranks.
const RELAY_OPS: u64 = 100_000;
/// Relay rounds that size the queues and buffers before the relay counts allocations.
const WARM_UP_ROUNDS: u64 = 1_000;
const LONG: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    match std::env::var("OMPI_COMM_WORLD_RANK") {
        Ok(_) => {
            let case = std::env::args().nth(1).unwrap_or_default();
            match run_rank(&case) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("{message}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(_) => launch_all(),
    }
}

/// One case run by mpirun: how many ranks, and whether the run should succeed.
struct Case {
    name: &'static str,
    ranks: u32,
    succeeds: bool,
    limit: Duration,
    /// Extra mpirun options.
    options: &'static [&'static str],
    /// Lines the run must print (beside `rank r: ok` from every rank when it succeeds).
    prints: &'static [&'static str],
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn launch_all() -> ExitCode {
    let cases = [
        Case {
            name: "relay",
            ranks: 2,
            succeeds: true,
            limit: secs(120),
            options: &[],
            prints: &[],
        },
        Case {
            name: "relay",
            ranks: 4,
            succeeds: true,
            limit: secs(120),
            options: &[],
            prints: &[],
        },
        Case {
            name: "failure",
            ranks: 4,
            succeeds: true,
            limit: secs(60),
            options: &[],
            prints: &[],
        },
        Case {
            name: "inside_world",
            ranks: 2,
            succeeds: true,
            limit: secs(60),
            options: &[],
            prints: &[],
        },
        Case {
            name: "malformed",
            ranks: 2,
            succeeds: true,
            limit: secs(60),
            options: &[],
            prints: &[],
        },
        // Open MPI's default: mpirun ends the whole job when a rank dies.
        Case {
            name: "killed",
            ranks: 4,
            succeeds: false,
            limit: secs(60),
            options: &[],
            prints: &[],
        },
        // With recovery on, mpirun lets the survivors run: each gives up at its own timeout.
        Case {
            name: "killed",
            ranks: 4,
            succeeds: false,
            limit: secs(60),
            options: &["--enable-recovery"],
            prints: &[
                "rank 0: gave up on rank 2",
                "rank 1: gave up on rank 2",
                "rank 3: gave up on rank 2",
            ],
        },
    ];
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut failed = 0;
    for case in cases {
        let started = Instant::now();
        let output = Command::new("timeout")
            .args(["--kill-after=5", &case.limit.as_secs().to_string(), "mpirun"])
            .args(["--oversubscribe", "-n", &case.ranks.to_string()])
            .args(case.options)
            .arg(&exe)
            .arg(case.name)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output();
        let output = match output {
            Ok(output) => output,
            Err(error) => {
                eprintln!("{}: cannot run timeout/mpirun ({error}); run scripts/mpi.sh", case.name);
                return ExitCode::FAILURE;
            }
        };
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let code = output.status.code();
        // `timeout` exits 124 (or 137 after --kill-after); mpirun itself may exit 137 when a
        // rank was killed, so the elapsed time decides.
        let timed_out = elapsed >= case.limit;
        let ok_lines =
            (0..case.ranks).filter(|r| stdout.contains(&format!("rank {r}: ok"))).count();
        let verdict = if timed_out {
            Err(format!("hung past {:?}", case.limit))
        } else if case.succeeds && !(output.status.success() && ok_lines == case.ranks as usize) {
            Err(format!("exit {code:?}, {ok_lines} of {} ranks ok", case.ranks))
        } else if let Some(missing) = case.prints.iter().find(|line| !stdout.contains(*line)) {
            Err(format!("did not print {missing:?}"))
        } else if !case.succeeds && output.status.success() && case.prints.is_empty() {
            Err("succeeded although a rank was killed".to_string())
        } else {
            Ok(())
        };
        println!(
            "mpirun {} -n {} {}: {elapsed:.1?}, exit {code:?}",
            case.options.join(" "),
            case.ranks,
            case.name
        );
        for line in stdout.lines() {
            println!("  {line}");
        }
        if let Err(why) = verdict {
            failed += 1;
            println!("  FAILED: {why}");
            for line in stderr.lines().take(40) {
                println!("  stderr: {line}");
            }
        } else if !case.succeeds {
            let said =
                stderr.lines().find(|line| line.contains("signal") || line.contains("exited"));
            println!("  mpirun said: {}", said.unwrap_or("(nothing on stderr)").trim());
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A device with one CPU queue on machine `rank` and `semaphores` system-wide semaphores.
fn device(
    rank: i32,
    semaphores: usize,
    failing_call: bool,
) -> (&'static Device, QueueId, Vec<SemaphoreId>) {
    let mut builder = Device::builder(PoolConfig::with_workers(1));
    let driver = builder.driver(CpuBackend::new());
    let mut config = QueueConfig::default();
    config.machine = rank as u16;
    config.driver = driver;
    config.capacity = 512;
    let queue = builder.queue(config);
    let home: Endpoint = builder.endpoint(queue).expect("the queue exists");
    let mut ids = Vec::new();
    for _ in 0..semaphores {
        let mut config = SemaphoreConfig::new(0, Scope::SystemWide, home);
        config.history = 256;
        ids.push(builder.semaphore_config(config));
    }
    if failing_call {
        builder.host_call(|_| Err(Failure::Application(7)));
    }
    let device = builder.build().map_err(|e| e.to_string()).expect("the device builds");
    (Box::leak(Box::new(device)), queue, ids)
}

/// The node, kept from finalising MPI when a check fails: finalising waits for every rank,
/// and a failed rank should end (so mpirun ends the job) rather than wait.
fn started(
    node: Result<Node, causeway_distributed::NodeError>,
) -> Result<ManuallyDrop<Node>, String> {
    node.map(ManuallyDrop::new).map_err(|e| e.to_string())
}

fn check(condition: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(what())
    }
}

fn rank_of() -> i32 {
    std::env::var("OMPI_COMM_WORLD_RANK").ok().and_then(|r| r.parse().ok()).unwrap_or(-1)
}

fn size_of() -> i32 {
    std::env::var("OMPI_COMM_WORLD_SIZE").ok().and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn run_rank(case: &str) -> Result<(), String> {
    let rank = rank_of();
    let result = match case {
        "relay" => relay(rank, size_of()),
        "failure" => failure(rank),
        "malformed" => malformed(rank),
        "inside_world" => inside_world(rank),
        "killed" => killed(rank),
        other => Err(format!("unknown case {other:?}")),
    };
    match &result {
        Ok(()) => println!("rank {rank}: ok"),
        Err(why) => println!("rank {rank}: FAILED: {why}"),
    }
    result
}

/// Rank r signals link r (its semaphore 0) each round and, past rank 0, waits on link r-1
/// (its semaphore 1). Past the first [`WARM_UP_ROUNDS`], no thread of any rank allocates.
fn relay(rank: i32, size: i32) -> Result<(), String> {
    let rounds = RELAY_OPS / size as u64;
    let (device, queue, semaphores) = device(rank, 2, false);
    let (own, upstream) = (semaphores[0], semaphores[1]);
    let mut links = Links::new();
    if rank + 1 < size {
        links.export(LinkId(rank as u32), own, &[rank + 1]);
    }
    if rank > 0 {
        links.import(LinkId(rank as u32 - 1), upstream, rank - 1);
    }
    let node = started(Node::start(device, &links))?;
    let mut last = None;
    let mut allocations_before = 0;
    for round in 1..=rounds {
        if round == WARM_UP_ROUNDS {
            allocations_before = support::ALLOCATIONS.load(Ordering::SeqCst);
        }
        let waits = [(upstream, round)];
        let waits: &[(SemaphoreId, u64)] = if rank > 0 {
            let link = LinkId(rank as u32 - 1);
            node.await_announced(link, round, LONG)
                .map_err(|e| format!("round {round}: {e} ({:?})", node.link_error(link)))?;
            &waits
        } else {
            &[]
        };
        let op = Op {
            waits,
            signals: &[(own, round)],
            work: Work::Barrier,
            tag: round,
            ..Default::default()
        };
        last = Some(node.submit(queue, &op).map_err(|e| format!("round {round}: {e}"))?);
    }
    // Every thread of this rank, while the host thread announced, submitted and awaited
    // announcements, and the worker ran the operations, the watch callbacks and MPI progress.
    let allocations = support::ALLOCATIONS.load(Ordering::SeqCst) - allocations_before;
    check(allocations == 0, || {
        format!("{allocations} heap allocations in rounds {WARM_UP_ROUNDS}..={rounds}")
    })?;
    let receipt = last.ok_or("no rounds")?;
    // Every rank up to this one, each at the last round: learned from announcements alone.
    for machine in 0..=rank {
        let epoch = receipt
            .frontier
            .iter()
            .find(|point| {
                point.axis.machine() == machine as u16 && point.axis.domain() == Domain::Queue
            })
            .map(|point| point.epoch);
        check(epoch == Some(rounds), || {
            format!("frontier {:?} lacks machine {machine} at {rounds}", receipt.frontier)
        })?;
    }
    println!("rank {rank}: final frontier has {} entries", receipt.frontier.len());
    let reached = blocking::wait(device.semaphore(own).ok_or("own")?, rounds, Some(LONG));
    check(reached == Ok(rounds), || format!("own semaphore: {reached:?}"))?;
    if rank > 0 {
        // The late-waiter rule on an imported timeline: a wait on a value reached long ago
        // imports the signal that first reached it (upstream's operation of that round), not
        // the newest one — and the import carries upstream's own upstream, one round earlier
        // in its knowledge at most.
        let late = rounds - 10;
        let mirror = device.semaphore(upstream).ok_or("upstream")?;
        match mirror.lookup(late) {
            Lookup::Tracked { origin, frontier, reached: true, aged_out: false } => {
                check(origin.axis.machine() == rank as u16 - 1 && origin.epoch == late, || {
                    format!("a late wait on {late} imports {origin:?}")
                })?;
                check(frontier.get(origin.axis) == Some(late), || {
                    format!("the imported frontier {frontier:?} lacks its origin")
                })?;
            }
            other => return Err(format!("a late wait on {late} finds {other:?}")),
        }
    }
    // Nothing is outstanding any more: the progress process is parked, not polling.
    let parked = node.progress_stats().drains;
    std::thread::sleep(Duration::from_millis(200));
    let later = node.progress_stats().drains;
    check(later <= parked + 1, || {
        format!("the progress process drained {} times while idle", later - parked)
    })?;
    let stats = node.progress_stats();
    println!(
        "rank {rank}: progress drains {} (asleep after {}), sent {}, received {}",
        stats.drains, stats.sleeps, stats.sent, stats.received
    );
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

/// Rank 1's host function fails; ranks 0 and 3 wait on what it signals.
fn failure(rank: i32) -> Result<(), String> {
    let (device, queue, semaphores) = device(rank, 2, rank == 1);
    let (shared, local) = (semaphores[0], semaphores[1]);
    let link = LinkId(1);
    let mut links = Links::new();
    match rank {
        1 => {
            links.export(link, shared, &[0, 3]);
        }
        0 | 3 => {
            links.import(link, shared, 1);
        }
        _ => {}
    }
    let node = started(Node::start(device, &links))?;
    node.barrier();
    match rank {
        1 => {
            let call = causeway_device::HostCallId(0);
            let op = Op {
                waits: &[],
                signals: &[(shared, 1)],
                work: Work::Host(call),
                tag: 1,
                ..Default::default()
            };
            node.submit(queue, &op).map_err(|e| e.to_string())?;
            let seen = node.wait(link, 1, LONG);
            check(seen == Err(HostWaitError::Failed(Failure::Application(7))), || {
                format!("rank 1 saw {seen:?}")
            })?;
        }
        0 | 3 => {
            // The failure may arrive with the announcement, or be all that arrives.
            let announced = node.await_announced(link, 1, LONG);
            check(
                matches!(announced, Ok(()) | Err(HostWaitError::Failed(Failure::Application(7)))),
                || format!("announcement: {announced:?}"),
            )?;
            let op = Op {
                waits: &[(shared, 1)],
                signals: &[(local, 1)],
                work: Work::Barrier,
                tag: 2,
                ..Default::default()
            };
            node.submit(queue, &op).map_err(|e| e.to_string())?;
            let seen = node.wait(link, 1, LONG);
            check(seen == Err(HostWaitError::Failed(Failure::Application(7))), || {
                format!("the link: {seen:?}")
            })?;
            let downstream = blocking::wait(device.semaphore(local).ok_or("local")?, 1, Some(LONG));
            check(matches!(downstream, Err(blocking::HostWaitError::Failed(_))), || {
                format!("the operation waiting on it signalled: {downstream:?}")
            })?;
        }
        _ => {}
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

/// Rank 0 submits, inside `Node::with_world` (holding the MPI lock), more exported signals
/// than a submitter sends itself: the node must leave them to its progress process rather than
/// wait for the lock it holds. Rank 1 waits for the last.
fn inside_world(rank: i32) -> Result<(), String> {
    const SIGNALS: u64 = 200;
    let (device, queue, semaphores) = device(rank, 1, false);
    let shared = semaphores[0];
    let mut links = Links::new();
    if rank == 0 {
        links.export(LinkId(1), shared, &[1]);
    } else {
        links.import(LinkId(1), shared, 0);
    }
    let node = started(Node::start(device, &links))?;
    if rank == 0 {
        node.with_world(|_| {
            (1..=SIGNALS).try_for_each(|value| {
                let op = Op {
                    waits: &[],
                    signals: &[(shared, value)],
                    work: Work::Barrier,
                    tag: 0,
                    ..Default::default()
                };
                node.submit(queue, &op).map(|_| ()).map_err(|e| format!("signal {value}: {e}"))
            })
        })?;
    } else {
        let seen = node.wait(LinkId(1), SIGNALS, LONG);
        check(seen == Ok(SIGNALS), || format!("the link: {seen:?}"))?;
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

/// Rank 1 sends garbage about links 5, 6 and 7 to rank 0: a truncated frontier, an unknown
/// frontier version, and a well-formed message with bytes after it, longer than any message
/// causeway encodes (the receiver takes it whole, never truncated by MPI, and refuses it).
fn malformed(rank: i32) -> Result<(), String> {
    let (device, queue, semaphores) = device(rank, 4, false);
    let (five, six, seven, local) = (semaphores[0], semaphores[1], semaphores[2], semaphores[3]);
    let mut links = Links::new();
    if rank == 0 {
        links.import(LinkId(5), five, 1).import(LinkId(6), six, 1).import(LinkId(7), seven, 1);
    } else {
        links.export(LinkId(5), five, &[0]).export(LinkId(6), six, &[0]).export(
            LinkId(7),
            seven,
            &[0],
        );
    }
    let node = started(Node::start(device, &links))?;
    if rank == 1 {
        let mut frontier = causeway_core::frontier::Frontier::new();
        let axis = device.axis(queue).ok_or("axis")?;
        frontier.insert_or_raise(axis, 1);
        let origin = causeway_core::frontier::Point { axis, epoch: 1 };
        let mut bytes = Vec::new();
        Message::Pending { link: LinkId(5), value: 1, origin, frontier }.encode(&mut bytes);
        node.send_raw(0, &bytes[..bytes.len() - 3]);
        let mut bytes = Vec::new();
        Message::Pending { link: LinkId(6), value: 1, origin, frontier }.encode(&mut bytes);
        bytes[5 + 24] = 0xee; // the frontier's version byte
        node.send_raw(0, &bytes);
        let mut bytes = Vec::new();
        Message::Pending { link: LinkId(7), value: 1, origin, frontier }.encode(&mut bytes);
        bytes.resize(2 * MAX_MESSAGE_LEN, 0);
        node.send_raw(0, &bytes);
    } else {
        let op = Op {
            waits: &[(five, 1)],
            signals: &[(local, 1)],
            work: Work::Barrier,
            tag: 1,
            ..Default::default()
        };
        node.submit(queue, &op).map_err(|e| e.to_string())?;
        for link in [LinkId(5), LinkId(6), LinkId(7)] {
            let seen = node.wait(link, 1, LONG);
            check(seen == Err(HostWaitError::Failed(Failure::DeviceLost)), || {
                format!("link {}: {seen:?}", link.0)
            })?;
        }
        let five_error = node.link_error(LinkId(5));
        check(
            five_error
                == Some(RemoteError::Malformed(MessageError::Frontier {
                    link: LinkId(5),
                    error: causeway_core::frontier::WireError::Truncated,
                })),
            || format!("link 5: {five_error:?}"),
        )?;
        let six_error = node.link_error(LinkId(6));
        check(
            six_error
                == Some(RemoteError::Malformed(MessageError::Frontier {
                    link: LinkId(6),
                    error: causeway_core::frontier::WireError::UnsupportedVersion(0xee),
                })),
            || format!("link 6: {six_error:?}"),
        )?;
        let seven_error = node.link_error(LinkId(7));
        check(
            seven_error
                == Some(RemoteError::Malformed(MessageError::TrailingBytes { link: LinkId(7) })),
            || format!("link 7: {seven_error:?}"),
        )?;
        let downstream = blocking::wait(device.semaphore(local).ok_or("local")?, 1, Some(LONG));
        check(matches!(downstream, Err(blocking::HostWaitError::Failed(_))), || {
            format!("the operation waiting on link 5 signalled: {downstream:?}")
        })?;
        println!(
            "rank 0: link 5 failed: {}",
            five_error.map(|e| e.to_string()).unwrap_or_default()
        );
        println!("rank 0: link 6 failed: {}", six_error.map(|e| e.to_string()).unwrap_or_default());
        println!(
            "rank 0: link 7 failed: {}",
            seven_error.map(|e| e.to_string()).unwrap_or_default()
        );
    }
    node.barrier();
    ManuallyDrop::into_inner(node).finish();
    Ok(())
}

/// Rank 2 dies by SIGKILL; the others wait on what it would have signalled.
fn killed(rank: i32) -> Result<(), String> {
    let (device, _queue, semaphores) = device(rank, 1, false);
    let link = LinkId(2);
    let mut links = Links::new();
    if rank == 2 {
        links.export(link, semaphores[0], &[0, 1, 3]);
    } else {
        links.import(link, semaphores[0], 2);
    }
    let node = started(Node::start(device, &links))?;
    node.barrier();
    if rank == 2 {
        let _ = Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
        std::thread::sleep(LONG);
        return Err("still alive after SIGKILL".into());
    }
    let seen = node.wait(link, 1, Duration::from_secs(10));
    check(seen == Err(HostWaitError::TimedOut), || format!("waiting on the dead rank: {seen:?}"))?;
    let failure = device.semaphore(semaphores[0]).and_then(|s| s.failure());
    check(
        node.link_error(link) == Some(RemoteError::TimedOut)
            && failure == Some(Failure::DeviceLost),
        || format!("after the timeout: {:?}, {failure:?}", node.link_error(link)),
    )?;
    // Reached only when mpirun lets survivors run (`--enable-recovery`); by default it ends
    // the job first. Finalising would wait on rank 2, so the rank ends here.
    println!("rank {rank}: gave up on rank 2 after its timeout");
    std::process::exit(2);
}
