//! Reading a scenario file: TOML into raw tables (with source spans), then names resolved and
//! values checked, every problem reported with its line.
//!
//! Every problem of the file is reported, in line order, not only the first one found: each
//! table is read and resolved whatever became of the others. One exception keeps the report
//! true: when a `[[queue]]` or `[[semaphore]]` cannot be read at all, operations are read but
//! not resolved, since every name they give of what was unreadable would be reported unknown.
//!
//! Loading is linear in the file: names resolve through hash maps built as the declarations
//! are read (so a later duplicate is found where it is written), and byte offsets become line
//! numbers by a binary search over the line starts, found in one pass over the source.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use causeway_core::queue::Resolution;
use causeway_core::scope::{Scope, UnknownScope};
use serde::Deserialize;
use toml::Spanned;

use super::drivers;
use super::model::{
    ComputeKernel, Conditions, DriverKind, Home, OpExpect, OpName, OpSpec, QueueSpec, Scenario,
    ScenarioError, SemaphoreSpec, StatusExpect, Target, TotalsExpect, WorkSpec,
};
use super::segment::{self, Segment, Table};

/// The queue name that means "the host, synchronously".
pub const HOST: &str = "host";

/// The axis name of the collective channel `all_reduce` steps run on (in `expect_frontier`,
/// reports and traces).
pub const COLLECTIVE: &str = "collective";

const DEFAULT_WORKERS: usize = 2;
const DEFAULT_QUOTA: u64 = 1 << 30;

/// The whole file's tables, or (when read a segment at a time) one segment's: a segment holds
/// only the preamble's keys or one table, so every field is optional here and the merged
/// result is checked by the resolver.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    workers: Option<Spanned<usize>>,
    memory_quota: Option<u64>,
    #[serde(rename = "queue")]
    queues: Option<Vec<Spanned<RawQueue>>>,
    #[serde(rename = "semaphore")]
    semaphores: Option<Vec<Spanned<RawSemaphore>>>,
    #[serde(rename = "op")]
    ops: Option<Vec<Spanned<RawOp>>>,
    expect: Option<RawTotals>,
}

impl RawScenario {
    /// Whether any table is given here (as opposed to top-level keys only).
    fn has_tables(&self) -> bool {
        self.queues.is_some()
            || self.semaphores.is_some()
            || self.ops.is_some()
            || self.expect.is_some()
    }
}

/// A raw table and the offset of the text it was read from, which its spans are relative to.
struct Placed<T> {
    base: usize,
    table: Spanned<T>,
}

impl<T> Placed<T> {
    fn all(base: usize, tables: Option<Vec<Spanned<T>>>) -> impl Iterator<Item = Placed<T>> {
        tables.unwrap_or_default().into_iter().map(move |table| Placed { base, table })
    }
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
    cancel: Option<Spanned<RawCancel>>,
    expect_frontier: Option<Spanned<BTreeMap<String, u64>>>,
    expect_resolution: Option<Spanned<Vec<String>>>,
    expect_status: Option<Spanned<String>>,
    expect_tainted: Option<bool>,
}

/// A host step's `cancel = { axis = "queue", after = epoch }`: the queue's work after that
/// epoch is rejected speculation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCancel {
    axis: String,
    after: u64,
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
    Compute {
        kernel: String,
        elements: u32,
        #[serde(default = "one")]
        tiles: u32,
        #[serde(default = "one")]
        regions: u32,
    },
    Copy {
        bytes: u64,
    },
    Alloca {
        buffer: String,
        bytes: u64,
    },
    Dealloca {
        buffer: String,
    },
    #[serde(rename = "all_reduce")]
    AllReduce {
        elements: u32,
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
///
/// The text is read a table at a time where `segment::split` can cut it (every scenario
/// written in the documented format), so the TOML library's document of the whole file never
/// exists; otherwise it is read as one document. Either way the result, errors included, is
/// what TOML's rules give for the whole file.
pub fn parse(path: &Path, source: &str) -> Result<Scenario, ScenarioError> {
    let lines = LineStarts::of(source);
    match segment::split(source) {
        Some(segments) => parse_segments(path, source, lines, &segments),
        None => read_document(path, source, lines),
    }
}

/// [`parse`] reading `source` as one TOML document, whatever its shape: what `parse` does with
/// a text it cannot cut, and the reference its segment-at-a-time reading is tested (and
/// fuzzed) against. It needs several kilobytes per table more than `parse` while it reads.
pub fn parse_document(path: &Path, source: &str) -> Result<Scenario, ScenarioError> {
    read_document(path, source, LineStarts::of(source))
}

fn read_document(path: &Path, source: &str, lines: LineStarts) -> Result<Scenario, ScenarioError> {
    let raw: RawScenario = read_toml(path, &lines, source, 0)?;
    let queues: Vec<_> = Placed::all(0, raw.queues).collect();
    let semaphores: Vec<_> = Placed::all(0, raw.semaphores).collect();
    let head = Head {
        name: raw.name,
        description: raw.description,
        workers: raw.workers.map(|table| Placed { base: 0, table }),
        memory_quota: raw.memory_quota,
        expect: raw.expect.unwrap_or_default(),
    };
    Resolver::new(path, &lines, Vec::new()).scenario(
        head,
        &queues,
        &semaphores,
        Placed::all(0, raw.ops).map(Ok),
    )
}

/// Reads `source` a segment at a time: first every table but the operations (which may name
/// queues and semaphores declared after them), then the operations one by one, each resolved
/// as it is read. A table that cannot be read is reported, and the others are read on.
fn parse_segments(
    path: &Path,
    source: &str,
    lines: LineStarts,
    segments: &[Segment],
) -> Result<Scenario, ScenarioError> {
    let read = |segment: &Segment| -> Result<RawScenario, ScenarioError> {
        read_toml(path, &lines, &source[segment.start..segment.end], segment.start)
    };
    let mut head = Head::default();
    let mut queues = Vec::new();
    let mut semaphores = Vec::new();
    let mut unread = Vec::new();
    let mut declarations_unread = false;
    for segment in segments.iter().filter(|segment| segment.table != Table::Op) {
        let part = match read(segment) {
            Ok(part) => part,
            Err(error) => {
                unread.push(error);
                declarations_unread |= matches!(segment.table, Table::Queue | Table::Semaphore);
                continue;
            }
        };
        match segment.table {
            // Filtered out above: operations are read in the second pass.
            Table::Op => {}
            Table::Preamble if !part.has_tables() => {
                head.name = part.name;
                head.description = part.description;
                head.workers = part.workers.map(|table| Placed { base: segment.start, table });
                head.memory_quota = part.memory_quota;
            }
            Table::Queue => queues.extend(Placed::all(segment.start, part.queues)),
            Table::Semaphore => semaphores.extend(Placed::all(segment.start, part.semaphores)),
            Table::Expect => head.expect = part.expect.unwrap_or_default(),
            // Tables given inline in the preamble, or headers the format does not have: what
            // they mean (or which error they are) is the whole document's to say.
            Table::Preamble | Table::Other => return read_document(path, source, lines),
        }
    }
    // An `[[op]]` segment holds exactly one operation: its header is the segment's only one
    // that is not a sub-table of it.
    let ops = segments.iter().filter(|segment| segment.table == Table::Op).map(|segment| {
        let part = read(segment)?;
        match part.ops.and_then(|ops| ops.into_iter().next()) {
            Some(table) => Ok(Placed { base: segment.start, table }),
            None => Err(ScenarioError::at(path, lines.line(segment.start), "an empty [[op]]")),
        }
    });
    if declarations_unread {
        // Names given of what could not be read would all be reported unknown.
        let problems = unread.into_iter().chain(ops.filter_map(Result::err)).collect();
        let unreadable = || ScenarioError::in_file(path, "a declaration cannot be read");
        return Err(ScenarioError::gathered(problems).unwrap_or_else(unreadable));
    }
    Resolver::new(path, &lines, unread).scenario(head, &queues, &semaphores, ops)
}

/// Deserializes `text`, which starts at byte `base` of the source, reporting a TOML error at
/// its line in the source.
fn read_toml<T: serde::de::DeserializeOwned>(
    path: &Path,
    lines: &LineStarts,
    text: &str,
    base: usize,
) -> Result<T, ScenarioError> {
    toml::from_str(text).map_err(|error| {
        let line = lines.line(base + error.span().map_or(0, |span| span.start));
        ScenarioError::at(path, line, error.message().trim())
    })
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

/// The top-level keys and the `[expect]` table.
#[derive(Default)]
struct Head {
    name: Option<String>,
    description: Option<String>,
    workers: Option<Placed<usize>>,
    memory_quota: Option<u64>,
    expect: RawTotals,
}

/// Declared names and their indices, borrowed from the raw tables.
struct Names<'r> {
    queues: HashMap<&'r str, usize>,
    semaphores: HashMap<&'r str, usize>,
}

struct Resolver<'a> {
    path: &'a Path,
    lines: &'a LineStarts,
    /// The offset of the text the table being resolved was read from.
    base: Cell<usize>,
    buffers: Vec<String>,
    buffer_index: HashMap<String, usize>,
    /// The operations' waits and signals read so far (see [`Conditions`]).
    conditions: Vec<(usize, u64)>,
    /// The operations' names read so far (see [`OpName`]).
    op_names: String,
    /// Every problem found so far.
    problems: Vec<ScenarioError>,
}

impl Resolver<'_> {
    /// A resolver of the tables of the file at `path`, whose `problems` so far are given.
    fn new<'a>(
        path: &'a Path,
        lines: &'a LineStarts,
        problems: Vec<ScenarioError>,
    ) -> Resolver<'a> {
        Resolver {
            path,
            lines,
            base: Cell::new(0),
            buffers: Vec::new(),
            buffer_index: HashMap::new(),
            conditions: Vec::new(),
            op_names: String::new(),
            problems,
        }
    }

    /// `result`'s value, or `None` with its problem noted.
    fn take<T>(&mut self, result: Result<T, ScenarioError>) -> Option<T> {
        result.map_err(|problem| self.problems.push(problem)).ok()
    }

    /// Notes the problem `message` at `at`.
    fn refuse<T>(&mut self, at: &Spanned<T>, message: impl Into<String>) {
        let problem = self.error(at, message);
        self.problems.push(problem);
    }

    fn line<T>(&self, spanned: &Spanned<T>) -> usize {
        self.lines.line(self.base.get() + spanned.span().start)
    }

    fn error<T>(&self, at: &Spanned<T>, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.path, self.line(at), message)
    }

    fn scenario(
        mut self,
        head: Head,
        raw_queues: &[Placed<RawQueue>],
        raw_semaphores: &[Placed<RawSemaphore>],
        raw_ops: impl Iterator<Item = Result<Placed<RawOp>, ScenarioError>>,
    ) -> Result<Scenario, ScenarioError> {
        // Graph files are named after their file when they give no name; so are scenarios.
        let name = head.name.unwrap_or_else(|| {
            self.path.file_stem().map_or_else(String::new, |stem| stem.to_string_lossy().into())
        });
        let workers = match &head.workers {
            Some(workers) => {
                self.base.set(workers.base);
                let count = *workers.table.get_ref();
                if !(1..=64).contains(&count) {
                    self.refuse(&workers.table, "workers must be between 1 and 64");
                }
                count
            }
            None => DEFAULT_WORKERS,
        };
        let (queues, queue_index) = self.queues(raw_queues);
        let (semaphores, semaphore_index) = self.semaphores(raw_semaphores, &queues, &queue_index);
        let names = Names { queues: queue_index, semaphores: semaphore_index };
        let mut ops = Vec::new();
        let mut defined: HashSet<String> = HashSet::new();
        let mut written = false;
        for op in raw_ops {
            written = true;
            let Some(op) = self.take(op) else { continue };
            self.base.set(op.base);
            let name = op.table.get_ref().name.get_ref();
            let first = defined.insert(name.clone());
            if !first {
                self.refuse(&op.table.get_ref().name, format!("op `{name}` is defined twice"));
            }
            let spec = self.op(&op.table, &queues, &names);
            ops.extend(spec.filter(|_| first));
        }
        if !written {
            self.problems.push(ScenarioError::in_file(self.path, "the scenario has no [[op]]"));
        }
        if let Some(error) = ScenarioError::gathered(std::mem::take(&mut self.problems)) {
            return Err(error);
        }
        let expect = TotalsExpect {
            elided: head.expect.elided,
            satisfied: head.expect.satisfied,
            device: head.expect.device,
            held: head.expect.held,
            tainted: head.expect.tainted,
            memory_reused: head.expect.memory_reused,
            peak_memory: head.expect.peak_memory,
        };
        Ok(Scenario {
            name,
            description: head.description.unwrap_or_default(),
            path: self.path.to_path_buf(),
            workers,
            memory_quota: head.memory_quota.unwrap_or(DEFAULT_QUOTA),
            queues,
            semaphores,
            buffers: self.buffers,
            ops,
            conditions: self.conditions,
            op_names: self.op_names,
            expect,
        })
    }

    /// The queues, each name once (a refused queue is declared all the same, on the CPU
    /// driver, so that operations naming it are not reported again).
    fn queues<'r>(
        &mut self,
        raw: &'r [Placed<RawQueue>],
    ) -> (Vec<QueueSpec>, HashMap<&'r str, usize>) {
        let mut queues: Vec<QueueSpec> = Vec::with_capacity(raw.len());
        let mut index = HashMap::with_capacity(raw.len());
        for placed in raw {
            self.base.set(placed.base);
            let spanned = &placed.table;
            let queue = spanned.get_ref();
            let name = queue.name.get_ref();
            if name == HOST {
                self.refuse(&queue.name, "`host` is reserved for host steps");
                continue;
            }
            if index.contains_key(name.as_str()) {
                self.refuse(&queue.name, format!("queue `{name}` is defined twice"));
                continue;
            }
            index.insert(name.as_str(), queues.len());
            let driver = match &queue.driver {
                None => DriverKind::Cpu,
                Some(named) => {
                    match DriverKind::ALL.iter().find(|kind| kind.name() == named.get_ref()) {
                        Some(&kind) => kind,
                        None => {
                            let available: Vec<&str> =
                                DriverKind::ALL.iter().map(|kind| kind.name()).collect();
                            let message = format!(
                                "driver `{}` is not available (this build has: {})",
                                named.get_ref(),
                                available.join(", ")
                            );
                            self.refuse(named, message);
                            DriverKind::Cpu
                        }
                    }
                }
            };
            queues.push(QueueSpec {
                name: name.clone(),
                line: self.line(spanned),
                machine: queue.machine,
                device: queue.device,
                group: queue.group,
                wait_before_signal: queue.wait_before_signal,
                driver,
            });
        }
        if raw.is_empty() {
            self.problems
                .push(ScenarioError::in_file(self.path, "the scenario declares no [[queue]]"));
        }
        (queues, index)
    }

    /// The semaphores, each name once (a refused one is declared all the same, so that
    /// operations naming it are not reported again).
    fn semaphores<'r>(
        &mut self,
        raw: &'r [Placed<RawSemaphore>],
        queues: &[QueueSpec],
        queue_index: &HashMap<&str, usize>,
    ) -> (Vec<SemaphoreSpec>, HashMap<&'r str, usize>) {
        let mut semaphores: Vec<SemaphoreSpec> = Vec::with_capacity(raw.len());
        let mut index = HashMap::with_capacity(raw.len());
        for placed in raw {
            self.base.set(placed.base);
            let spanned = &placed.table;
            let semaphore = spanned.get_ref();
            let name = semaphore.name.get_ref();
            if index.contains_key(name.as_str()) {
                self.refuse(&semaphore.name, format!("semaphore `{name}` is defined twice"));
                continue;
            }
            index.insert(name.as_str(), semaphores.len());
            let scope = match &semaphore.scope {
                None => Scope::ProcessLocal,
                Some(scope) => scope.get_ref().parse().unwrap_or_else(|_: UnknownScope| {
                    let names: Vec<&str> = Scope::ALL.iter().map(|known| known.name()).collect();
                    let message =
                        format!("unknown scope `{}` ({})", scope.get_ref(), names.join(", "));
                    self.refuse(scope, message);
                    Scope::ProcessLocal
                }),
            };
            let home = match &semaphore.home {
                None => Home::Queue(0),
                Some(home) if home.get_ref() == HOST => Home::Host,
                Some(home) => {
                    let queue = self.queue_index(home, queues, queue_index);
                    Home::Queue(self.take(queue).unwrap_or(0))
                }
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
        (semaphores, index)
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

    /// The operation, or `None` with every problem it has noted.
    fn op(
        &mut self,
        spanned: &Spanned<RawOp>,
        queues: &[QueueSpec],
        names: &Names<'_>,
    ) -> Option<OpSpec> {
        let op = spanned.get_ref();
        let problems_before = self.problems.len();
        let target = if op.queue.get_ref() == HOST {
            Some(Target::Host)
        } else {
            let queue = self.queue_index(&op.queue, queues, &names.queues);
            self.take(queue).map(Target::Queue)
        };
        let mut waits = Vec::with_capacity(op.wait.len());
        for wait in &op.wait {
            let wait = self.condition(wait, ">=", names);
            waits.extend(self.take(wait));
        }
        let mut signals = Vec::with_capacity(op.signal.len());
        for signal in &op.signal {
            let signal = self.condition(signal, "=", names);
            signals.extend(self.take(signal));
        }
        if op.wait.len() > causeway::device::MAX_WAITS {
            self.refuse(&op.name, format!("more than {} waits", causeway::device::MAX_WAITS));
        }
        if op.signal.len() > causeway::device::MAX_SIGNALS {
            self.refuse(&op.name, format!("more than {} signals", causeway::device::MAX_SIGNALS));
        }
        let work = match &op.work {
            None => Some(WorkSpec::Noop),
            Some(spanned) => {
                let work = self.work(spanned);
                self.take(work)
            }
        };
        if let (Some(target), Some(work), Some(spanned)) = (target, &work, &op.work) {
            self.check_fit(target, work, spanned, queues);
        }
        if target.is_some_and(|target| target != Target::Host)
            && (op.external || op.fail.is_some() || op.cancel.is_some())
        {
            self.refuse(
                &op.name,
                "`external`, `fail` and `cancel` are host steps (queue = \"host\")",
            );
        }
        if matches!(work, Some(WorkSpec::AllReduce { .. }))
            && (op.signal.len() != 1 || op.external || op.fail.is_some() || op.cancel.is_some())
        {
            self.refuse(
                &op.name,
                "an all_reduce step signals exactly one semaphore (its result), with no \
                 `external`, `fail` or `cancel`",
            );
        }
        let cancel = op.cancel.as_ref().and_then(|spanned| {
            let RawCancel { axis, after } = spanned.get_ref();
            match names.queues.get(axis.as_str()) {
                Some(&queue) => Some((queue, *after)),
                None => {
                    self.refuse(spanned, format!("cancel: unknown queue `{axis}`"));
                    None
                }
            }
        });
        let fail = op.fail.as_ref().and_then(|name| {
            let semaphore = self.semaphore_index(name, name.get_ref(), names);
            Some((self.take(semaphore)?, op.failure_code.unwrap_or(1)))
        });
        let expect = self.expectations(op, &names.queues);
        let (Some(target), Some(work)) = (target, work) else { return None };
        if self.problems.len() > problems_before {
            return None;
        }
        Some(OpSpec {
            name: OpName::push(&mut self.op_names, op.name.get_ref()),
            line: self.line(spanned),
            target,
            conditions: Conditions::push(&mut self.conditions, waits, signals),
            work,
            external: op.external,
            fail,
            cancel,
            expect,
        })
    }

    /// Notes why `work`, given at `spanned`, cannot run on `target`, if it cannot.
    fn check_fit(
        &mut self,
        target: Target,
        work: &WorkSpec,
        spanned: &Spanned<RawWork>,
        queues: &[QueueSpec],
    ) {
        match (target, work) {
            (Target::Host, WorkSpec::Noop | WorkSpec::Spin(_) | WorkSpec::Sleep(_))
            | (Target::Host, WorkSpec::AllReduce { .. }) => {}
            (Target::Host, _) => {
                self.refuse(spanned, "host steps can only do noop, spin, sleep or all_reduce work")
            }
            (Target::Queue(_), WorkSpec::AllReduce { .. }) => self.refuse(
                spanned,
                "all_reduce is a collective step that every rank performs: queue = \"host\"",
            ),
            (Target::Queue(queue), _) => {
                let (name, driver) = (&queues[queue].name, queues[queue].driver);
                if !drivers::runs(driver, work) {
                    let message = format!(
                        "queue `{name}` (driver {}) cannot run this work: {}",
                        driver.name(),
                        drivers::kinds(driver)
                    );
                    self.refuse(spanned, message);
                }
            }
        }
    }

    fn work(&mut self, spanned: &Spanned<RawWork>) -> Result<WorkSpec, ScenarioError> {
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
                let most = drivers::MAX_REGIONS;
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
            RawWork::Compute { kernel, elements, tiles, regions } => {
                let Some(&kind) = ComputeKernel::ALL.iter().find(|k| k.name() == kernel) else {
                    let names: Vec<&str> = ComputeKernel::ALL.iter().map(|k| k.name()).collect();
                    return Err(self.error(
                        spanned,
                        format!("unknown kernel `{kernel}` (kernels: {})", names.join(", ")),
                    ));
                };
                drivers::check_compute(*elements, *tiles, *regions)
                    .map_err(|message| self.error(spanned, message))?;
                WorkSpec::Compute {
                    kernel: kind,
                    elements: *elements,
                    tiles: *tiles,
                    regions: *regions,
                }
            }
            RawWork::Copy { bytes } => WorkSpec::Copy {
                bytes: drivers::check_copy(*bytes)
                    .map_err(|message| self.error(spanned, message))?,
            },
            RawWork::Alloca { buffer, bytes } => {
                WorkSpec::Alloca { buffer: self.buffer(buffer), bytes: *bytes }
            }
            RawWork::Dealloca { buffer } => WorkSpec::Dealloca { buffer: self.buffer(buffer) },
            RawWork::AllReduce { elements } => {
                if *elements == 0 || *elements > drivers::MAX_ELEMENTS {
                    return Err(self.error(
                        spanned,
                        format!(
                            "an all_reduce sums 1 to {} elements, not {elements}",
                            drivers::MAX_ELEMENTS
                        ),
                    ));
                }
                WorkSpec::AllReduce { elements: *elements }
            }
        };
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

    /// The operation's expectations; each one that cannot be read is noted and left out.
    fn expectations(&mut self, op: &RawOp, queue_index: &HashMap<&str, usize>) -> OpExpect {
        let frontier = op.expect_frontier.as_ref().and_then(|map| {
            let unknown = map.get_ref().keys().find(|axis| {
                *axis != HOST && *axis != COLLECTIVE && !queue_index.contains_key(axis.as_str())
            });
            if let Some(axis) = unknown {
                self.refuse(map, format!("expect_frontier names unknown axis `{axis}`"));
                return None;
            }
            Some(map.get_ref().iter().map(|(k, v)| (k.clone(), *v)).collect())
        });
        let resolution = op.expect_resolution.as_ref().and_then(|list| {
            if list.get_ref().len() != op.wait.len() {
                let message = format!(
                    "expect_resolution lists {} resolutions for {} waits",
                    list.get_ref().len(),
                    op.wait.len()
                );
                self.refuse(list, message);
                return None;
            }
            let parsed = list.get_ref().iter().map(|r| {
                r.split('|').map(|alternative| alternative.trim().parse().ok()).collect::<Option<Vec<Resolution>>>().ok_or_else(|| {
                    self.error(list, format!(
                        "unknown resolution `{r}` (elided, satisfied, device, held, or alternatives like satisfied|device)"
                    ))
                })
            });
            let parsed = parsed.collect::<Result<Vec<_>, _>>();
            self.take(parsed)
        });
        let status = op.expect_status.as_ref().and_then(|status| match status.get_ref().as_str() {
            "ok" => Some(StatusExpect::Ok),
            "failed" => Some(StatusExpect::Failed),
            "cancelled" => Some(StatusExpect::Cancelled),
            other => {
                self.refuse(status, format!("unknown status `{other}` (ok, failed, cancelled)"));
                None
            }
        });
        OpExpect { frontier, resolution, status, tainted: op.expect_tainted }
    }
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

    /// Each problem once, with its line: a refused declaration still declares its name, and a
    /// declaration that cannot be read stops the resolution of names, not the reading.
    #[test]
    fn every_problem_is_reported_once_in_line_order() {
        let problems = |error: ScenarioError| -> Vec<(Option<usize>, String)> {
            error
                .problems()
                .map(|p| p.to_string())
                .map(|shown| {
                    let (line, message) = shown["t.toml:".len()..].split_once(": ").unwrap();
                    (line.parse().ok(), message.to_owned())
                })
                .collect()
        };
        let echoed = refused(&format!(
            "{HEADER}[[op]]\nname = \"a\"\nqueue = \"gpu\"\nwait = [\"s>=x\"]\n\
             [[queue]]\nname = \"gpu\"\ndriver = \"tpu\"\n"
        ));
        assert_eq!(
            problems(echoed),
            [
                (Some(9), "malformed wait `s>=x`: expected `semaphore>=value`".to_owned()),
                (
                    Some(12),
                    "driver `tpu` is not available (this build has: cpu, vulkan, npu, cuda)"
                        .to_owned()
                )
            ]
        );
        let unreadable =
            refused("[[queue]]\nname = 3\n[[op]]\nname = \"a\"\nqueue = \"q0\"\nbogus = 1\n");
        let unreadable = problems(unreadable);
        assert_eq!(
            unreadable.iter().map(|(line, _)| *line).collect::<Vec<_>>(),
            [Some(2), Some(6)]
        );
        assert!(unreadable[1].1.starts_with("unknown field `bogus`"), "{unreadable:?}");
    }

    #[test]
    fn a_scenario_without_a_name_is_named_after_its_file() {
        let source = "[[queue]]\nname = \"q0\"\n[[op]]\nname = \"a\"\nqueue = \"q0\"\n";
        let scenario = parse(Path::new("somewhere/prefill-stage.toml"), source).unwrap();
        assert_eq!(scenario.name, "prefill-stage");
        assert_eq!(
            parse_document(Path::new("prefill-stage.toml"), source).unwrap().name,
            scenario.name
        );
    }

    #[test]
    fn all_reduce_is_a_host_step_with_one_result() {
        let step = |fields: &str| {
            format!("{HEADER}[[op]]\nname = \"ar\"\n{fields}work = {{ kind = \"all_reduce\", elements = 4 }}\n")
        };
        let ok = parse(Path::new("t.toml"), &step("queue = \"host\"\nsignal = [\"s=1\"]\n"));
        assert_eq!(ok.unwrap().ops[0].work, WorkSpec::AllReduce { elements: 4 });
        let on_queue = refused(&step("queue = \"q0\"\nsignal = [\"s=1\"]\n"));
        assert_eq!(on_queue.line, Some(10));
        assert!(on_queue.message.contains("queue = \"host\""), "{}", on_queue.message);
        let no_result = refused(&step("queue = \"host\"\n"));
        assert!(no_result.message.contains("exactly one semaphore"), "{}", no_result.message);
        let empty = refused(&format!(
            "{HEADER}[[op]]\nname = \"ar\"\nqueue = \"host\"\nsignal = [\"s=1\"]\n\
             work = {{ kind = \"all_reduce\", elements = 0 }}\n"
        ));
        assert!(empty.message.contains("1 to"), "{}", empty.message);
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
        let scope = refused(&format!("{HEADER}[[semaphore]]\nname = \"t\"\nscope = \"device\"\n"));
        assert_eq!(
            (scope.line, scope.message.as_str()),
            (
                Some(8),
                "unknown scope `device` \
                 (queue-local, device-local, device-group, process-local, system-wide)"
            )
        );
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

    type Reading = Result<Scenario, ScenarioError>;

    /// Both readings of `source`, a segment at a time and as one document, where it can be cut.
    fn both_readings(source: &str) -> Option<(Reading, Reading)> {
        let path = Path::new("t.toml");
        let segments = segment::split(source)?;
        Some((
            parse_segments(path, source, LineStarts::of(source), &segments),
            parse_document(path, source),
        ))
    }

    #[test]
    fn every_bundled_and_generated_scenario_reads_the_same_a_segment_at_a_time() {
        let generated = [
            super::super::generate::pipeline(300),
            super::super::generate::fan_in(300),
            super::super::generate::many_semaphores(300),
        ];
        let bundled = super::super::bundled::ALL.iter().map(|b| b.source);
        for source in bundled.chain(generated.iter().map(String::as_str)) {
            let (segmented, whole) = both_readings(source).expect("cut at its headers");
            assert!(whole.is_ok(), "{whole:?}");
            assert_eq!(segmented, whole);
        }
    }

    #[test]
    fn tables_the_format_does_not_cut_are_read_as_one_document() {
        let inline = format!(
            "name = \"t\"\nqueue = [{{ name = \"q0\" }}]\n{}",
            "[[op]]\nname = \"a\"\nqueue = \"q0\"\n"
        );
        assert_eq!(parse(Path::new("t.toml"), &inline).unwrap().queues[0].name, "q0");
        let unknown = refused(&format!("{HEADER}[[op]]\nname = \"a\"\nqueue = \"q0\"\n[extra]\n"));
        assert_eq!(unknown.line, Some(9));
        assert!(unknown.message.starts_with("unknown field `extra`"), "{}", unknown.message);
    }

    /// One operation of a generated scenario, written in one of several TOML styles.
    #[derive(Clone, Debug)]
    struct WrittenOp {
        queue: usize,
        wait: Option<u64>,
        work_as_sub_table: bool,
        waits_over_lines: bool,
        comment: Option<&'static str>,
        tricky_string: bool,
    }

    fn written_op() -> impl Strategy<Value = WrittenOp> {
        (
            0..3usize,
            prop::option::of(0..4u64),
            any::<bool>(),
            any::<bool>(),
            prop::option::of(prop::sample::select(vec!["# [[op]]", "# ] } \" '", "#"])),
            any::<bool>(),
        )
            .prop_map(
                |(queue, wait, work_as_sub_table, waits_over_lines, comment, tricky_string)| {
                    WrittenOp {
                        queue,
                        wait,
                        work_as_sub_table,
                        waits_over_lines,
                        comment,
                        tricky_string,
                    }
                },
            )
    }

    /// A scenario text: queues, semaphores and operations interleaved, sub-tables, values over
    /// several lines, comments and strings holding brackets and quotes, and (by `mistake`) one
    /// line replaced by an error.
    fn scenario_text(ops: &[WrittenOp], mistake: Option<(usize, &str)>) -> String {
        let mut lines: Vec<String> = vec!["name = \"t\"".into(), "workers = 2".into()];
        for queue in 0..3 {
            lines.push(format!("[[queue]]\nname = \"q{queue}\""));
        }
        for (index, op) in ops.iter().enumerate() {
            if index == 1 {
                lines.push("[expect]\nelided = 0".into());
            }
            lines.push(format!("  [[op]] {}", op.comment.unwrap_or("")));
            lines.push(format!("name = \"op{index}\""));
            lines.push(format!("queue = \"q{}\"", op.queue));
            if let Some(value) = op.wait.filter(|_| index > 0) {
                let wait = format!("\"s{}>={value}\"", index - 1);
                lines.push(if op.waits_over_lines {
                    format!("wait = [\n  # [[op]]\n  {wait},\n]")
                } else {
                    format!("wait = [{wait}]")
                });
            }
            lines.push(format!("signal = [\"s{index}=1\"]"));
            if op.tricky_string {
                lines.push("expect_status = \"ok\" # \"\"\" [[queue]]".into());
            }
            if op.work_as_sub_table {
                lines.push(format!("[op.work]\nkind = \"spin\"\nus = {index}"));
            }
            lines.push(format!("[[semaphore]]\nname = \"s{index}\"\nhome = \"q{}\"", op.queue));
        }
        if let Some((at, text)) = mistake {
            let at = at % lines.len();
            lines[at] = text.to_string();
        }
        lines.join("\n") + "\n"
    }

    proptest! {
        #[test]
        fn a_segment_at_a_time_reads_what_the_whole_document_reads(
            ops in prop::collection::vec(written_op(), 1..12),
            mistake in prop::option::of((0..200usize, prop::sample::select(vec![
                "queue = \"q9\"", "name = \"op0\"", "wait = [\"s0>=x\"]", "kind = \"warp\"",
                "signal = 7", "[[queue]]\nname = \"q1\"", "[[semaphore]]\nname = \"s0\"",
                "bogus = 1", "workers = 99", "[[op]]\nname = \"z\"",
            ]))),
        ) {
            let text = scenario_text(&ops, mistake);
            let readings = both_readings(&text);
            // Only a mistake can make a text of the format one that cannot be cut (a header
            // between an operation and its `[op.work]`); the loader then reads the document.
            let Some((segmented, whole)) = readings else {
                prop_assert!(mistake.is_some(), "a text of the format could not be cut");
                return Ok(());
            };
            match (&segmented, &whole) {
                (Ok(_), Ok(_)) => prop_assert_eq!(&segmented, &whole),
                // Where a file has several problems the two readings may meet a different one
                // first (the whole document checks all syntax before any name, and reports no
                // more once the syntax fails, where segments read on); each names a line of
                // the file, and where both name the same problem first, it is the same.
                (Err(a), Err(b)) => {
                    prop_assert!(a.line.is_some() && b.line.is_some(), "{:?} / {:?}", a, b);
                    if mistake.is_some() && a.message == b.message {
                        let first = |error: &ScenarioError| error.problems().next().map(|p| p.to_string());
                        prop_assert_eq!(first(a), first(b));
                    }
                }
                _ => prop_assert!(false, "one reading failed: {:?} / {:?}", segmented, whole),
            }
        }

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
