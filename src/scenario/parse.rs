//! Reading a scenario file: TOML into raw tables (with source spans), then names resolved and
//! values checked, every problem reported with its line.
//!
//! Loading is linear in the file: names resolve through hash maps built as the declarations
//! are read (so a later duplicate is found where it is written), and byte offsets become line
//! numbers by a binary search over the line starts, found in one pass over the source.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::Scope;
use serde::Deserialize;
use toml::Spanned;

use super::model::{
    Home, OpExpect, OpSpec, QueueSpec, Scenario, ScenarioError, SemaphoreSpec, StatusExpect,
    Target, TotalsExpect, WorkSpec,
};

/// The queue name that means "the host, synchronously".
pub const HOST: &str = "host";

const DEFAULT_WORKERS: usize = 2;
const DEFAULT_QUOTA: u64 = 1 << 30;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    workers: Option<Spanned<usize>>,
    memory_quota: Option<u64>,
    #[serde(default, rename = "queue")]
    queues: Vec<Spanned<RawQueue>>,
    #[serde(default, rename = "semaphore")]
    semaphores: Vec<Spanned<RawSemaphore>>,
    #[serde(default, rename = "op")]
    ops: Vec<Spanned<RawOp>>,
    #[serde(default)]
    expect: RawTotals,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    name: Spanned<String>,
    driver: Option<Spanned<String>>,
    #[serde(default)]
    machine: u16,
    #[serde(default)]
    device: u32,
    #[serde(default)]
    group: u32,
    #[serde(default = "yes")]
    wait_before_signal: bool,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSemaphore {
    name: Spanned<String>,
    #[serde(default)]
    initial: u64,
    scope: Option<Spanned<String>>,
    home: Option<Spanned<String>>,
    expect_value: Option<u64>,
    expect_failed: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    name: Spanned<String>,
    queue: Spanned<String>,
    #[serde(default)]
    wait: Vec<Spanned<String>>,
    #[serde(default)]
    signal: Vec<Spanned<String>>,
    work: Option<Spanned<RawWork>>,
    #[serde(default)]
    external: bool,
    fail: Option<Spanned<String>>,
    failure_code: Option<u32>,
    expect_frontier: Option<Spanned<BTreeMap<String, u64>>>,
    expect_resolution: Option<Spanned<Vec<String>>>,
    expect_status: Option<Spanned<String>>,
    expect_tainted: Option<bool>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum RawWork {
    Noop,
    Spin {
        us: u64,
    },
    Sleep {
        us: u64,
    },
    Host {
        #[serde(default)]
        us: u64,
        fail: Option<u32>,
    },
    Tiles {
        tiles: u32,
        #[serde(default)]
        us: u64,
        #[serde(default = "one")]
        regions: u32,
    },
    Alloca {
        buffer: String,
        bytes: u64,
    },
    Dealloca {
        buffer: String,
    },
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTotals {
    elided: Option<u64>,
    satisfied: Option<u64>,
    device: Option<u64>,
    held: Option<u64>,
    tainted: Option<u64>,
    memory_reused: Option<u64>,
    peak_memory: Option<u64>,
}

/// Reads and validates the scenario at `path`.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let source = std::fs::read_to_string(path)
        .map_err(|error| ScenarioError::in_file(path, format!("cannot read: {error}")))?;
    parse(path, &source)
}

/// Validates scenario `source`, reporting problems against `path`.
pub fn parse(path: &Path, source: &str) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = toml::from_str(source).map_err(|error| {
        let line = error.span().map(|span| LineStarts::of(source).line(span.start));
        ScenarioError {
            path: path.to_path_buf(),
            line,
            message: error.message().trim().to_string(),
            deadlock: false,
        }
    })?;
    // Found only now, so the line starts do not add to the peak of the TOML library's document.
    let lines = LineStarts::of(source);
    Resolver { path, lines, buffers: Vec::new(), buffer_index: HashMap::new() }.scenario(&raw)
}

/// Where each line of a source starts, for turning byte offsets into line numbers.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(source: &str) -> LineStarts {
        let after_newlines =
            source.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(at, _)| at + 1);
        LineStarts(std::iter::once(0).chain(after_newlines).collect())
    }

    /// The 1-based line holding byte `offset` (the last line for offsets past the end).
    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&start| start <= offset)
    }
}

/// Declared names and their indices, borrowed from the raw tables.
struct Names<'r> {
    queues: HashMap<&'r str, usize>,
    semaphores: HashMap<&'r str, usize>,
}

struct Resolver<'a> {
    path: &'a Path,
    lines: LineStarts,
    buffers: Vec<String>,
    buffer_index: HashMap<String, usize>,
}

impl Resolver<'_> {
    fn line<T>(&self, spanned: &Spanned<T>) -> usize {
        self.lines.line(spanned.span().start)
    }

    fn error<T>(&self, at: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.path, self.line(at), message)
    }

    fn scenario(mut self, raw: &RawScenario) -> Result<Scenario, ScenarioError> {
        let workers = match &raw.workers {
            Some(workers) if !(1..=64).contains(workers.get_ref()) => {
                return Err(self.error(workers, "workers must be between 1 and 64"));
            }
            Some(workers) => *workers.get_ref(),
            None => DEFAULT_WORKERS,
        };
        let (queues, queue_index) = self.queues(&raw.queues)?;
        let (semaphores, semaphore_index) =
            self.semaphores(&raw.semaphores, &queues, &queue_index)?;
        let names = Names { queues: queue_index, semaphores: semaphore_index };
        let mut ops = Vec::with_capacity(raw.ops.len());
        let mut op_names: HashSet<&str> = HashSet::with_capacity(raw.ops.len());
        for op in &raw.ops {
            let name = op.get_ref().name.get_ref();
            if !op_names.insert(name) {
                return Err(self.error(&op.get_ref().name, format!("op `{name}` is defined twice")));
            }
            ops.push(self.op(op, &queues, &names)?);
        }
        if ops.is_empty() {
            return Err(ScenarioError::in_file(self.path, "the scenario has no [[op]]"));
        }
        let expect = TotalsExpect {
            elided: raw.expect.elided,
            satisfied: raw.expect.satisfied,
            device: raw.expect.device,
            held: raw.expect.held,
            tainted: raw.expect.tainted,
            memory_reused: raw.expect.memory_reused,
            peak_memory: raw.expect.peak_memory,
        };
        Ok(Scenario {
            name: raw.name.clone(),
            description: raw.description.clone(),
            path: self.path.to_path_buf(),
            workers,
            memory_quota: raw.memory_quota.unwrap_or(DEFAULT_QUOTA),
            queues,
            semaphores,
            buffers: self.buffers,
            ops,
            expect,
        })
    }

    fn queues<'r>(
        &self,
        raw: &'r [Spanned<RawQueue>],
    ) -> Result<(Vec<QueueSpec>, HashMap<&'r str, usize>), ScenarioError> {
        let mut queues: Vec<QueueSpec> = Vec::with_capacity(raw.len());
        let mut index = HashMap::with_capacity(raw.len());
        for spanned in raw {
            let queue = spanned.get_ref();
            let name = queue.name.get_ref();
            if name == HOST {
                return Err(self.error(&queue.name, "`host` is reserved for host steps"));
            }
            if index.insert(name.as_str(), queues.len()).is_some() {
                return Err(self.error(&queue.name, format!("queue `{name}` is defined twice")));
            }
            if let Some(driver) = &queue.driver {
                if driver.get_ref() != "cpu" {
                    return Err(self.error(
                        driver,
                        format!(
                            "driver `{}` is not available (this build has: cpu)",
                            driver.get_ref()
                        ),
                    ));
                }
            }
            queues.push(QueueSpec {
                name: name.clone(),
                line: self.line(spanned),
                machine: queue.machine,
                device: queue.device,
                group: queue.group,
                wait_before_signal: queue.wait_before_signal,
            });
        }
        if queues.is_empty() {
            return Err(ScenarioError::in_file(self.path, "the scenario declares no [[queue]]"));
        }
        Ok((queues, index))
    }

    fn semaphores<'r>(
        &self,
        raw: &'r [Spanned<RawSemaphore>],
        queues: &[QueueSpec],
        queue_index: &HashMap<&str, usize>,
    ) -> Result<(Vec<SemaphoreSpec>, HashMap<&'r str, usize>), ScenarioError> {
        let mut semaphores: Vec<SemaphoreSpec> = Vec::with_capacity(raw.len());
        let mut index = HashMap::with_capacity(raw.len());
        for spanned in raw {
            let semaphore = spanned.get_ref();
            let name = semaphore.name.get_ref();
            if index.insert(name.as_str(), semaphores.len()).is_some() {
                return Err(
                    self.error(&semaphore.name, format!("semaphore `{name}` is defined twice"))
                );
            }
            let scope = match &semaphore.scope {
                None => Scope::ProcessLocal,
                Some(scope) => parse_scope(scope.get_ref()).ok_or_else(|| {
                    self.error(scope, format!(
                        "unknown scope `{}` (queue-local, device-local, device-group, process-local, system-wide)",
                        scope.get_ref()
                    ))
                })?,
            };
            let home = match &semaphore.home {
                None => Home::Queue(0),
                Some(home) if home.get_ref() == HOST => Home::Host,
                Some(home) => Home::Queue(self.queue_index(home, queues, queue_index)?),
            };
            semaphores.push(SemaphoreSpec {
                name: name.clone(),
                line: self.line(spanned),
                initial: semaphore.initial,
                scope,
                home,
                expect_value: semaphore.expect_value,
                expect_failed: semaphore.expect_failed,
            });
        }
        Ok((semaphores, index))
    }

    fn queue_index(
        &self,
        name: &Spanned<String>,
        queues: &[QueueSpec],
        queue_index: &HashMap<&str, usize>,
    ) -> Result<usize, ScenarioError> {
        queue_index.get(name.get_ref().as_str()).copied().ok_or_else(|| {
            let known: Vec<&str> = queues.iter().map(|q| q.name.as_str()).collect();
            self.error(
                name,
                format!(
                    "unknown queue `{}` (declared: {}, or host)",
                    name.get_ref(),
                    known.join(", ")
                ),
            )
        })
    }

    fn semaphore_index(
        &self,
        at: &Spanned<String>,
        name: &str,
        names: &Names<'_>,
    ) -> Result<usize, ScenarioError> {
        names
            .semaphores
            .get(name)
            .copied()
            .ok_or_else(|| self.error(at, format!("unknown semaphore `{name}`")))
    }

    /// Parses `"s>=3"` (waits) or `"s=3"` (signals).
    fn condition(
        &self,
        text: &Spanned<String>,
        operator: &str,
        names: &Names<'_>,
    ) -> Result<(usize, u64), ScenarioError> {
        let kind = if operator == ">=" { "wait" } else { "signal" };
        let malformed = || {
            self.error(
                text,
                format!(
                    "malformed {kind} `{}`: expected `semaphore{operator}value`",
                    text.get_ref()
                ),
            )
        };
        let (name, value) = text.get_ref().split_once(operator).ok_or_else(malformed)?;
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || (operator == "=" && name.ends_with(['>', '<', '!'])) {
            return Err(malformed());
        }
        let value: u64 = value.parse().map_err(|_| malformed())?;
        Ok((self.semaphore_index(text, name, names)?, value))
    }

    fn op(
        &mut self,
        spanned: &Spanned<RawOp>,
        queues: &[QueueSpec],
        names: &Names<'_>,
    ) -> Result<OpSpec, ScenarioError> {
        let op = spanned.get_ref();
        let target = if op.queue.get_ref() == HOST {
            Target::Host
        } else {
            Target::Queue(self.queue_index(&op.queue, queues, &names.queues)?)
        };
        let waits = op
            .wait
            .iter()
            .map(|w| self.condition(w, ">=", names))
            .collect::<Result<Vec<_>, _>>()?;
        let signals = op
            .signal
            .iter()
            .map(|s| self.condition(s, "=", names))
            .collect::<Result<Vec<_>, _>>()?;
        if waits.len() > causeway_driver_cpu::device::MAX_WAITS {
            return Err(self.error(
                &op.name,
                format!("more than {} waits", causeway_driver_cpu::device::MAX_WAITS),
            ));
        }
        if signals.len() > causeway_driver_cpu::device::MAX_SIGNALS {
            return Err(self.error(
                &op.name,
                format!("more than {} signals", causeway_driver_cpu::device::MAX_SIGNALS),
            ));
        }
        let work = match &op.work {
            None => WorkSpec::Noop,
            Some(work) => self.work(work, target)?,
        };
        if target != Target::Host && (op.external || op.fail.is_some()) {
            return Err(
                self.error(&op.name, "`external` and `fail` are host steps (queue = \"host\")")
            );
        }
        let fail = match &op.fail {
            None => None,
            Some(name) => Some((
                self.semaphore_index(name, name.get_ref(), names)?,
                op.failure_code.unwrap_or(1),
            )),
        };
        Ok(OpSpec {
            name: op.name.get_ref().clone(),
            line: self.line(spanned),
            target,
            waits,
            signals,
            work,
            external: op.external,
            fail,
            expect: self.expectations(op, &names.queues)?,
        })
    }

    fn work(
        &mut self,
        spanned: &Spanned<RawWork>,
        target: Target,
    ) -> Result<WorkSpec, ScenarioError> {
        let work = match spanned.get_ref() {
            RawWork::Noop => WorkSpec::Noop,
            RawWork::Spin { us } => WorkSpec::Spin(Duration::from_micros(*us)),
            RawWork::Sleep { us } => WorkSpec::Sleep(Duration::from_micros(*us)),
            RawWork::Host { us, fail } => {
                WorkSpec::Host { duration: Duration::from_micros(*us), fail: *fail }
            }
            RawWork::Tiles { tiles, us, regions } => {
                if *tiles == 0 || *regions == 0 {
                    return Err(self
                        .error(spanned, "a tiled dispatch needs at least one region of one tile"));
                }
                let most = causeway_driver_cpu::block::MAX_REGIONS;
                if *regions as usize > most {
                    return Err(self
                        .error(spanned, format!("a command buffer holds at most {most} regions")));
                }
                WorkSpec::Tiles {
                    regions: *regions,
                    tiles: *tiles,
                    duration: Duration::from_micros(*us),
                }
            }
            RawWork::Alloca { buffer, bytes } => {
                WorkSpec::Alloca { buffer: self.buffer(buffer), bytes: *bytes }
            }
            RawWork::Dealloca { buffer } => WorkSpec::Dealloca { buffer: self.buffer(buffer) },
        };
        if target == Target::Host
            && !matches!(work, WorkSpec::Noop | WorkSpec::Spin(_) | WorkSpec::Sleep(_))
        {
            return Err(self.error(spanned, "host steps can only do noop, spin or sleep work"));
        }
        Ok(work)
    }

    fn buffer(&mut self, name: &str) -> usize {
        if let Some(&index) = self.buffer_index.get(name) {
            return index;
        }
        self.buffers.push(name.to_string());
        self.buffer_index.insert(name.to_string(), self.buffers.len() - 1);
        self.buffers.len() - 1
    }

    fn expectations(
        &self,
        op: &RawOp,
        queue_index: &HashMap<&str, usize>,
    ) -> Result<OpExpect, ScenarioError> {
        let frontier = match &op.expect_frontier {
            None => None,
            Some(map) => {
                for axis in map.get_ref().keys() {
                    if axis != HOST && !queue_index.contains_key(axis.as_str()) {
                        return Err(
                            self.error(map, format!("expect_frontier names unknown axis `{axis}`"))
                        );
                    }
                }
                Some(map.get_ref().iter().map(|(k, v)| (k.clone(), *v)).collect())
            }
        };
        let resolution = match &op.expect_resolution {
            None => None,
            Some(list) => {
                if list.get_ref().len() != op.wait.len() {
                    return Err(self.error(
                        list,
                        format!(
                            "expect_resolution lists {} resolutions for {} waits",
                            list.get_ref().len(),
                            op.wait.len()
                        ),
                    ));
                }
                let parsed = list.get_ref().iter().map(|r| {
                    r.split('|').map(|alternative| parse_resolution(alternative.trim())).collect::<Option<Vec<_>>>().ok_or_else(|| {
                        self.error(list, format!(
                            "unknown resolution `{r}` (elided, satisfied, device, held, or alternatives like satisfied|device)"
                        ))
                    })
                });
                Some(parsed.collect::<Result<Vec<_>, _>>()?)
            }
        };
        let status = match &op.expect_status {
            None => None,
            Some(status) => Some(match status.get_ref().as_str() {
                "ok" => StatusExpect::Ok,
                "failed" => StatusExpect::Failed,
                "cancelled" => StatusExpect::Cancelled,
                other => {
                    return Err(self.error(
                        status,
                        format!("unknown status `{other}` (ok, failed, cancelled)"),
                    ))
                }
            }),
        };
        Ok(OpExpect { frontier, resolution, status, tainted: op.expect_tainted })
    }
}

fn parse_scope(text: &str) -> Option<Scope> {
    Some(match text {
        "queue-local" => Scope::QueueLocal,
        "device-local" => Scope::DeviceLocal,
        "device-group" => Scope::DeviceGroup,
        "process-local" => Scope::ProcessLocal,
        "system-wide" => Scope::SystemWide,
        _ => return None,
    })
}

fn parse_resolution(text: &str) -> Option<Resolution> {
    Some(match text {
        "elided" => Resolution::Elided,
        "satisfied" => Resolution::Satisfied,
        "device" => Resolution::DeviceWait,
        "held" => Resolution::Held,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn refused(source: &str) -> ScenarioError {
        parse(Path::new("t.toml"), source).unwrap_err()
    }

    const HEADER: &str = "name = \"t\"\n[[queue]]\nname = \"q0\"\n[[semaphore]]\nname = \"s\"\n";

    #[test]
    fn a_second_definition_is_refused_where_it_is_written() {
        let queue = refused(&format!("{HEADER}[[queue]]\nname = \"q0\"\n"));
        assert_eq!((queue.line, queue.message.as_str()), (Some(7), "queue `q0` is defined twice"));
        let semaphore = refused(&format!("{HEADER}[[semaphore]]\nname = \"s\"\n"));
        assert_eq!(
            (semaphore.line, semaphore.message.as_str()),
            (Some(7), "semaphore `s` is defined twice")
        );
        let op = refused(&format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\n[[op]]\nname = \"b\"\nqueue = \"q0\"\n\
             [[op]]\nname = \"a\"\nqueue = \"q0\"\n"
        ));
        assert_eq!((op.line, op.message.as_str()), (Some(13), "op `a` is defined twice"));
    }

    #[test]
    fn unknown_names_list_what_is_declared() {
        let queue = refused(&format!(
            "{HEADER}[[queue]]\nname = \"q1\"\n[[op]]\nname = \"a\"\nqueue = \"q9\"\n"
        ));
        assert_eq!(
            (queue.line, queue.message.as_str()),
            (Some(10), "unknown queue `q9` (declared: q0, q1, or host)")
        );
        let axis = refused(&format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nexpect_frontier = {{ q0 = 1, q7 = 1 }}\n"
        ));
        assert_eq!(
            (axis.line, axis.message.as_str()),
            (Some(9), "expect_frontier names unknown axis `q7`")
        );
        let fail =
            refused(&format!("{HEADER}[[op]]\nname = \"h\"\nqueue = \"host\"\nfail = \"x\"\n"));
        assert_eq!((fail.line, fail.message.as_str()), (Some(9), "unknown semaphore `x`"));
    }

    #[test]
    fn buffers_are_numbered_in_first_use_order() {
        let scenario = parse(
            Path::new("t.toml"),
            &format!(
                "{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"y\", bytes = 1 }}\n\
                 [[op]]\nname = \"b\"\nqueue = \"q0\"\nwork = {{ kind = \"alloca\", buffer = \"x\", bytes = 1 }}\n\
                 [[op]]\nname = \"c\"\nqueue = \"q0\"\nwork = {{ kind = \"dealloca\", buffer = \"y\" }}\n"
            ),
        )
        .unwrap();
        assert_eq!(scenario.buffers, ["y", "x"]);
        assert_eq!(scenario.ops[2].work, WorkSpec::Dealloca { buffer: 0 });
    }

    proptest! {
        #[test]
        fn line_starts_count_the_newlines_before_an_offset(
            source in "[a\n\u{e9}]{0,40}",
            offset in 0usize..50,
        ) {
            let newlines_before =
                source.bytes().take(offset).filter(|&b| b == b'\n').count();
            prop_assert_eq!(LineStarts::of(&source).line(offset), newlines_before + 1);
        }
    }
}
