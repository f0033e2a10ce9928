//! Fuzzes the scenario loader and checker with structure: an `Arbitrary` outline of a scenario
//! (queues; semaphores with initial values, scopes and homes; ops and host steps with waits,
//! signals, every work kind, external signals, failures and expectations; whole-run totals;
//! workers and a memory quota) is rendered as TOML text, then `scenario::parse::parse` and, for
//! every scenario it accepts, `scenario::check::check` run on it. Nothing runs on a device.
//!
//! Raw bytes rarely get past the TOML grammar; an outline does, so this target spends its time
//! in name resolution, value checks and the deadlock simulation (cycles, waits nothing signals,
//! queues stuck behind their own later signals, memory no dealloca frees, failures releasing
//! waiters). References are by index into what was declared, so they mostly resolve, and
//! signal values are drawn as steps above the last one submitted, so they mostly advance. A
//! small share of every choice is wrong on purpose: undeclared or duplicate names, awkward
//! unicode names, huge and negative numbers, host-only fields on queues, misspelt conditions
//! and, for the whole text, a truncation, a duplicated line or a value of the wrong type.
//!
//! Like `scenario_bytes`, loading and checking must never panic, hang or take unbounded memory,
//! every refusal must be a displayable error naming the file, and the loader's reading a table
//! at a time must accept the same texts as the same scenarios as reading the whole document.
#![no_main]

use std::fmt::Write;
use std::path::Path;

use arbitrary::Arbitrary;
use causeway_core::scope::Scope;
use causeway_scenario::{check, parse, Scenario, ScenarioError};
use libfuzzer_sys::fuzz_target;

const PATH: &str = "outline.toml";

fuzz_target!(|outline: Outline| {
    let source = outline.render();
    let parsed = parse::parse(Path::new(PATH), &source);
    assert_reads_as_one_document(&parsed, &source);
    match parsed {
        // `check` may hand back a plan on success; only its refusals matter here.
        Ok(scenario) => {
            if let Err(error) = check::check(&scenario) {
                assert_names_the_file(&error, &source);
            }
        }
        Err(error) => assert_names_the_file(&error, &source),
    }
});

/// `parse` agrees with reading `source` as one document: both accept it as the same scenario,
/// or both refuse it (where a text has several problems, each reading may name a different one
/// first).
fn assert_reads_as_one_document(parsed: &Result<Scenario, ScenarioError>, source: &str) {
    let whole = parse::parse_document(Path::new(PATH), source);
    match (parsed, &whole) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "--- source ---\n{source}"),
        (Err(_), Err(_)) => {}
        _ => panic!("the readings disagree: {parsed:?} / {whole:?}\n--- source ---\n{source}"),
    }
}

fn assert_names_the_file(error: &ScenarioError, source: &str) {
    let shown = error.to_string();
    assert!(shown.starts_with(PATH), "{shown}\n--- source ---\n{source}");
}

/// A whole scenario file.
#[derive(Arbitrary, Debug)]
struct Outline {
    name: Text,
    description: Option<Text>,
    workers: Option<Number>,
    memory_quota: Option<Number>,
    /// At least one queue, semaphore and op each: files without them are refused before any
    /// name resolves (`scenario_bytes` and the seeds cover that).
    first_queue: QueueOutline,
    queues: Vec<QueueOutline>,
    first_semaphore: SemaphoreOutline,
    semaphores: Vec<SemaphoreOutline>,
    first_op: OpOutline,
    ops: Vec<OpOutline>,
    totals: Option<Totals>,
    corruption: Corruption,
}

#[derive(Arbitrary, Debug)]
struct QueueOutline {
    label: Label,
    /// `cpu` below 248, otherwise a driver this build lacks.
    driver: Option<u8>,
    machine: Option<Number>,
    device: Option<Number>,
    group: Option<Number>,
    wait_before_signal: Option<bool>,
}

#[derive(Arbitrary, Debug)]
struct SemaphoreOutline {
    label: Label,
    initial: Option<Number>,
    /// One of the five scopes below 250, otherwise an unknown one.
    scope: Option<u8>,
    home: Option<QueuePick>,
    expect_value: Option<Number>,
    expect_failed: Option<bool>,
}

#[derive(Arbitrary, Debug)]
struct OpOutline {
    label: Label,
    queue: QueuePick,
    waits: Vec<Condition>,
    signals: Vec<Condition>,
    work: Option<Work>,
    external: bool,
    fail: Option<SemaphorePick>,
    failure_code: Option<Number>,
    expect_frontier: Option<Vec<(QueuePick, Number)>>,
    expect_resolution: Option<Vec<ResolutionName>>,
    expect_status: Option<StatusName>,
    expect_tainted: Option<bool>,
    /// Below 4 the op keeps every mistake drawn for it (host-only fields on a queue, device
    /// work on the host, misspelt conditions, unknown work kinds, resolutions and statuses, a
    /// resolution too many); otherwise those are left out or spelt right.
    misuse: u8,
}

#[derive(Arbitrary, Debug)]
struct Condition {
    semaphore: SemaphorePick,
    value: u8,
    /// Below 240 the canonical `s>=v` / `s=v`; above, spaced (still valid) or, when the op's
    /// misuse allows, wrong or incomplete spellings.
    spelling: u8,
}

#[derive(Arbitrary, Debug)]
enum Work {
    Noop,
    Spin { us: Number },
    Sleep { us: Number },
    Host { us: Option<Number>, fail: Option<Number> },
    Tiles { tiles: Number, us: Option<Number>, regions: Option<Number> },
    Alloca { buffer: u8, bytes: Number },
    Dealloca { buffer: u8 },
    Unknown,
}

#[derive(Arbitrary, Debug)]
enum ResolutionName {
    Elided,
    Satisfied,
    Device,
    Held,
    SatisfiedOrDevice,
    Unknown,
}

#[derive(Arbitrary, Debug)]
enum StatusName {
    Ok,
    Failed,
    Cancelled,
    Unknown,
}

#[derive(Arbitrary, Debug)]
struct Totals {
    elided: Option<Number>,
    satisfied: Option<Number>,
    device: Option<Number>,
    held: Option<Number>,
    tainted: Option<Number>,
    memory_reused: Option<Number>,
    peak_memory: Option<Number>,
}

/// A declaration's name: below 244 its own generated one (`q3`, `s1`, `op7`), so references
/// resolve; up to 249 an earlier sibling's (a duplicate); otherwise `text`.
#[derive(Arbitrary, Debug)]
struct Label {
    pick: u8,
    text: Text,
}

#[derive(Arbitrary, Debug)]
enum Text {
    Awkward(u8),
    Any(String),
}

/// Names that test the lexer and the resolver: reserved, empty, blank, non-ASCII, combining and
/// invisible characters, and the condition operators themselves.
const AWKWARD: &[&str] = &[
    "host",
    "",
    " ",
    "q0",
    "s0",
    "op0",
    "ключ",
    "名前",
    "e\u{301}",
    "🚀",
    "\u{200b}",
    "\u{feff}",
    "a=b",
    "s>=1",
    "s<",
    "a\"b",
    "back\\slash",
    "new\nline",
    "tab\t",
    "#hash",
    "[x]",
    "x.y",
];

/// A queue: below 220 a declared one (by index), up to 251 the host, otherwise undeclared.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct QueuePick(u8);

/// A semaphore: below 254 a declared one (by index), otherwise undeclared.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct SemaphorePick(u8);

/// An integer: for `pick` below 252 a small one (the field's least value plus 0..16 of its
/// unit), otherwise the edge value `edge` picks.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Number {
    pick: u8,
    edge: u8,
}

const EDGES: [i128; 8] = [
    64,
    65,
    u32::MAX as i128,
    u32::MAX as i128 + 1,
    i64::MAX as i128,
    -1,
    i64::MIN as i128,
    1 << 40,
];

/// What happens to the rendered text as a whole: below 224 nothing.
#[derive(Arbitrary, Debug)]
struct Corruption {
    pick: u8,
    at: u16,
    replacement: u8,
}

/// Values of every TOML type, to put where another type belongs.
const WRONG_TYPES: &[&str] =
    &["\"text\"", "7", "-1", "true", "[1, 2]", "{ a = 1 }", "1.5", "1979-05-27", "[]"];

/// How a field draws its small values: `least + k * unit` for k in 0..16.
#[derive(Clone, Copy)]
struct Scale {
    least: u64,
    unit: u64,
}

/// Counts, durations, indices: 0..16.
const PLAIN: Scale = Scale { least: 0, unit: 1 };
/// Workers, tiles, regions: 1..17, so that the loader accepts them.
const POSITIVE: Scale = Scale { least: 1, unit: 1 };
/// Bytes, in units that let allocations and quotas meet.
const BYTES: Scale = Scale { least: 0, unit: 64 };

impl Number {
    fn small(self) -> Option<u64> {
        (self.pick < 252).then_some(u64::from(self.pick % 16))
    }

    fn render(self, scale: Scale) -> String {
        match self.small() {
            Some(k) => (scale.least + k * scale.unit).to_string(),
            None => EDGES[usize::from(self.edge) % EDGES.len()].to_string(),
        }
    }
}

impl Text {
    fn render(&self) -> String {
        match self {
            Text::Awkward(k) => AWKWARD[usize::from(*k) % AWKWARD.len()].to_string(),
            Text::Any(text) => text.clone(),
        }
    }
}

impl Label {
    fn render(&self, prefix: &str, index: usize, earlier: &[String]) -> String {
        match self.pick {
            0..=243 => format!("{prefix}{index}"),
            244..=249 if !earlier.is_empty() => {
                earlier[usize::from(self.pick) % earlier.len()].clone()
            }
            _ => self.text.render(),
        }
    }
}

/// Rendering state: the names declared so far and, per semaphore, the last value submitted.
struct Renderer {
    out: String,
    queues: Vec<String>,
    semaphores: Vec<String>,
    ops: Vec<String>,
    submitted: Vec<u64>,
}

impl Outline {
    fn render(&self) -> String {
        let mut renderer = Renderer {
            out: String::new(),
            queues: Vec::new(),
            semaphores: Vec::new(),
            ops: Vec::new(),
            submitted: Vec::new(),
        };
        renderer.scenario(self);
        self.corruption.apply(renderer.out)
    }
}

impl Renderer {
    fn key(&mut self, key: &str, value: impl AsRef<str>) {
        writeln!(self.out, "{key} = {}", value.as_ref()).expect("writing to a String");
    }

    fn number(&mut self, key: &str, number: &Option<Number>, scale: Scale) {
        if let Some(number) = number {
            self.key(key, number.render(scale));
        }
    }

    fn flag(&mut self, key: &str, flag: &Option<bool>) {
        if let Some(flag) = flag {
            self.key(key, flag.to_string());
        }
    }

    fn scenario(&mut self, outline: &Outline) {
        self.key("name", quoted(&outline.name.render()));
        if let Some(description) = &outline.description {
            self.key("description", quoted(&description.render()));
        }
        self.number("workers", &outline.workers, POSITIVE);
        self.number("memory_quota", &outline.memory_quota, BYTES);
        for queue in std::iter::once(&outline.first_queue).chain(&outline.queues) {
            self.queue(queue);
        }
        for semaphore in std::iter::once(&outline.first_semaphore).chain(&outline.semaphores) {
            self.semaphore(semaphore);
        }
        for op in std::iter::once(&outline.first_op).chain(&outline.ops) {
            self.op(op);
        }
        if let Some(totals) = &outline.totals {
            self.out.push_str("\n[expect]\n");
            self.number("elided", &totals.elided, PLAIN);
            self.number("satisfied", &totals.satisfied, PLAIN);
            self.number("device", &totals.device, PLAIN);
            self.number("held", &totals.held, PLAIN);
            self.number("tainted", &totals.tainted, PLAIN);
            self.number("memory_reused", &totals.memory_reused, PLAIN);
            self.number("peak_memory", &totals.peak_memory, BYTES);
        }
    }

    fn queue(&mut self, queue: &QueueOutline) {
        let name = queue.label.render("q", self.queues.len(), &self.queues);
        self.out.push_str("\n[[queue]]\n");
        self.key("name", quoted(&name));
        if let Some(driver) = queue.driver {
            let driver = match driver {
                0..=247 => "cpu",
                248..=251 => "vulkan",
                _ => "CPU",
            };
            self.key("driver", quoted(driver));
        }
        self.number("machine", &queue.machine, PLAIN);
        self.number("device", &queue.device, PLAIN);
        self.number("group", &queue.group, PLAIN);
        self.flag("wait_before_signal", &queue.wait_before_signal);
        self.queues.push(name);
    }

    fn semaphore(&mut self, semaphore: &SemaphoreOutline) {
        let name = semaphore.label.render("s", self.semaphores.len(), &self.semaphores);
        self.out.push_str("\n[[semaphore]]\n");
        self.key("name", quoted(&name));
        self.number("initial", &semaphore.initial, PLAIN);
        if let Some(scope) = semaphore.scope {
            let scope = match scope {
                0..=249 => Scope::ALL[usize::from(scope) % Scope::ALL.len()].name(),
                _ => "galaxy-wide",
            };
            self.key("scope", quoted(scope));
        }
        if let Some(home) = semaphore.home {
            let home = self.queue_name(home);
            self.key("home", quoted(&home));
        }
        self.number("expect_value", &semaphore.expect_value, PLAIN);
        self.flag("expect_failed", &semaphore.expect_failed);
        // An initial value the loader refuses leaves this at 0; the check never sees it then.
        let initial = semaphore.initial.and_then(Number::small).unwrap_or(0);
        self.semaphores.push(name);
        self.submitted.push(initial);
    }

    fn op(&mut self, op: &OpOutline) {
        let name = op.label.render("op", self.ops.len(), &self.ops);
        let queue = self.queue_name(op.queue);
        let on_host = queue == "host";
        let misuse = op.misuse < 4;
        self.out.push_str("\n[[op]]\n");
        self.key("name", quoted(&name));
        self.key("queue", quoted(&queue));
        if !op.waits.is_empty() {
            let waits: Vec<String> = op.waits.iter().map(|wait| self.wait(wait, misuse)).collect();
            self.key("wait", list(&waits));
        }
        if !op.signals.is_empty() {
            let signals: Vec<String> =
                op.signals.iter().map(|signal| self.signal(signal, misuse)).collect();
            self.key("signal", list(&signals));
        }
        if let Some(work) = &op.work {
            let host_can_do = matches!(work, Work::Noop | Work::Spin { .. } | Work::Sleep { .. });
            let known = !matches!(work, Work::Unknown);
            if misuse || (known && (!on_host || host_can_do)) {
                self.key("work", work.render());
            }
        }
        if on_host || misuse {
            if op.external {
                self.key("external", "true");
            }
            if let Some(fail) = op.fail {
                let fail = self.semaphore_name(fail);
                self.key("fail", quoted(&fail));
            }
            self.number("failure_code", &op.failure_code, PLAIN);
        }
        if let Some(frontier) = &op.expect_frontier {
            let mut entries: Vec<(String, String)> = Vec::new();
            for &(axis, epoch) in frontier {
                let axis = self.queue_name(axis);
                // A repeated key is a TOML error of its own; the corruption covers that.
                if !entries.iter().any(|(known, _)| *known == axis) {
                    entries.push((axis, epoch.render(PLAIN)));
                }
            }
            let entries: Vec<String> =
                entries.iter().map(|(axis, epoch)| format!("{} = {epoch}", quoted(axis))).collect();
            self.key("expect_frontier", format!("{{ {} }}", entries.join(", ")));
        }
        if let Some(resolutions) = &op.expect_resolution {
            let mut names: Vec<String> = (0..op.waits.len())
                .map(|k| match resolutions.get(k) {
                    Some(ResolutionName::Unknown) if !misuse => "satisfied|device",
                    Some(resolution) => resolution.render(),
                    None => "satisfied|device",
                })
                .map(quoted)
                .collect();
            if misuse {
                names.push(quoted("elided"));
            }
            self.key("expect_resolution", list(&names));
        }
        match &op.expect_status {
            Some(StatusName::Unknown) if !misuse => {}
            Some(status) => self.key("expect_status", quoted(status.render())),
            None => {}
        }
        self.flag("expect_tainted", &op.expect_tainted);
        self.ops.push(name);
    }

    fn queue_name(&self, pick: QueuePick) -> String {
        match pick.0 {
            k @ 0..=219 if !self.queues.is_empty() => {
                self.queues[usize::from(k) % self.queues.len()].clone()
            }
            0..=251 => "host".to_string(),
            k => format!("nowhere{k}"),
        }
    }

    fn semaphore_name(&self, pick: SemaphorePick) -> String {
        match pick.0 {
            k @ 0..=253 if !self.semaphores.is_empty() => {
                self.semaphores[usize::from(k) % self.semaphores.len()].clone()
            }
            k => format!("nosuch{k}"),
        }
    }

    /// `s>=v` with `v` small, so that some waits are met and some never are; 255 is the
    /// largest value a condition can name.
    fn wait(&self, wait: &Condition, misuse: bool) -> String {
        let name = self.semaphore_name(wait.semaphore);
        let value = match wait.value {
            255 => u64::MAX,
            small => u64::from(small % 8),
        };
        quoted(&spell(&name, ">=", value, wait.spelling, misuse))
    }

    /// `s=v` one to three steps above the last value submitted on `s`; 0 repeats that value (the
    /// loader must refuse it) and 255 jumps to the largest value.
    fn signal(&mut self, signal: &Condition, misuse: bool) -> String {
        let name = self.semaphore_name(signal.semaphore);
        let submitted =
            self.semaphores.iter().position(|s| *s == name).map(|k| &mut self.submitted[k]);
        let last = submitted.as_deref().copied().unwrap_or(0);
        let value = match signal.value {
            0 => last,
            255 => u64::MAX,
            step => last.saturating_add(1 + u64::from(step % 3)),
        };
        if let Some(submitted) = submitted {
            *submitted = value;
        }
        quoted(&spell(&name, "=", value, signal.spelling, misuse))
    }
}

fn spell(name: &str, operator: &str, value: u64, spelling: u8, misuse: bool) -> String {
    let wrong_operator = if operator == "=" { ">=" } else { "=" };
    match spelling {
        240..=247 => format!("{name} {operator} {value}"),
        248..=250 if misuse => format!("{name}{wrong_operator}{value}"),
        251..=252 if misuse => format!("{name}{operator}"),
        253 if misuse => format!("{name}{operator}-{value}"),
        254 if misuse => format!("{name}{operator}0x{value:x}"),
        255 if misuse => format!("{operator}{value}"),
        _ => format!("{name}{operator}{value}"),
    }
}

impl Work {
    fn render(&self) -> String {
        let fields = match self {
            Work::Noop => "kind = \"noop\"".to_string(),
            Work::Spin { us } => format!("kind = \"spin\", us = {}", us.render(PLAIN)),
            Work::Sleep { us } => format!("kind = \"sleep\", us = {}", us.render(PLAIN)),
            Work::Host { us, fail } => {
                let mut fields = "kind = \"host\"".to_string();
                if let Some(us) = us {
                    write!(fields, ", us = {}", us.render(PLAIN)).expect("writing to a String");
                }
                if let Some(fail) = fail {
                    write!(fields, ", fail = {}", fail.render(PLAIN)).expect("writing to a String");
                }
                fields
            }
            Work::Tiles { tiles, us, regions } => {
                let mut fields = format!("kind = \"tiles\", tiles = {}", tiles.render(POSITIVE));
                if let Some(us) = us {
                    write!(fields, ", us = {}", us.render(PLAIN)).expect("writing to a String");
                }
                if let Some(regions) = regions {
                    write!(fields, ", regions = {}", regions.render(POSITIVE))
                        .expect("writing to a String");
                }
                fields
            }
            Work::Alloca { buffer, bytes } => format!(
                "kind = \"alloca\", buffer = \"b{}\", bytes = {}",
                buffer % 4,
                bytes.render(BYTES)
            ),
            Work::Dealloca { buffer } => {
                format!("kind = \"dealloca\", buffer = \"b{}\"", buffer % 4)
            }
            Work::Unknown => "kind = \"teleport\"".to_string(),
        };
        format!("{{ {fields} }}")
    }
}

impl ResolutionName {
    fn render(&self) -> &'static str {
        match self {
            ResolutionName::Elided => "elided",
            ResolutionName::Satisfied => "satisfied",
            ResolutionName::Device => "device",
            ResolutionName::Held => "held",
            ResolutionName::SatisfiedOrDevice => "satisfied|device",
            ResolutionName::Unknown => "teleported",
        }
    }
}

impl StatusName {
    fn render(&self) -> &'static str {
        match self {
            StatusName::Ok => "ok",
            StatusName::Failed => "failed",
            StatusName::Cancelled => "cancelled",
            StatusName::Unknown => "vanished",
        }
    }
}

impl Corruption {
    fn apply(&self, text: String) -> String {
        let line_count = text.lines().count().max(1);
        let line = usize::from(self.at) % line_count;
        match self.pick {
            0..=223 => text,
            224..=234 => {
                let mut cut = usize::from(self.at) % (text.len() + 1);
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text[..cut].to_string()
            }
            235..=245 => rewrite_line(&text, line, |original| format!("{original}\n{original}")),
            _ => rewrite_line(&text, line, |original| match original.split_once(" = ") {
                Some((key, _)) => {
                    let wrong = WRONG_TYPES[usize::from(self.replacement) % WRONG_TYPES.len()];
                    format!("{key} = {wrong}")
                }
                None => original.to_string(),
            }),
        }
    }
}

fn rewrite_line(text: &str, target: usize, rewrite: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for (index, line) in text.lines().enumerate() {
        if index == target {
            out.push_str(&rewrite(line));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// A TOML basic string holding `text` exactly.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                write!(out, "\\u{:04X}", u32::from(c)).expect("writing to a String")
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}
