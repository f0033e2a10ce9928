//! The HTML view of a run: one self-contained page (styles, script and the report inline; it
//! loads nothing) that shows how causality flowed — queue lanes over real time, the operation
//! graph with each wait's resolution, a step-through of the run event by event, the selected
//! operation's frontier, waits and learners, and what binary events or plain timelines would
//! have needed for the same run.
//!
//! The page is built from the `--report` JSON, so `causeway view REPORT.json` shows any saved
//! run and `causeway run FILE --html OUT.html` shows the run it just made — a run stopped at
//! its deadline too, as the deadline found it (what still ran, what had not started, every
//! wait not reached). A report is checked
//! against the report's shape before it is embedded: a truncated or foreign file is refused
//! with a [`ViewError`] naming the problem, never turned into a page that fails in the browser.
//!
//! The page's sources live beside this file (`page.html`, `page.css`, `page.js`) and are
//! compiled in; the browser tier (`cli/browser`) opens real pages in headless Chromium.

use std::fmt;
use std::io::{self, Write};

use serde::Deserialize;

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_CSS: &str = include_str!("page.css");
const PAGE_JS: &str = include_str!("page.js");

/// Where each inlined part goes in `page.html`.
const STYLE_SLOT: &str = "/*@style*/";
const SCRIPT_SLOT: &str = "/*@script*/";
const REPORT_SLOT: &str = "@report";
const TRACE_SLOT: &str = "@trace";

/// Why a report cannot be viewed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ViewError {
    /// The JSON ends before the document does (a file cut short).
    Truncated {
        /// Line where the input ran out.
        line: usize,
        /// Column where the input ran out.
        column: usize,
    },
    /// The file is not JSON.
    Syntax {
        /// Line of the first bad byte.
        line: usize,
        /// Column of the first bad byte.
        column: usize,
        /// What the parser found.
        message: String,
    },
    /// The file is JSON but not a causeway report (a missing key or a value of the wrong type).
    NotAReport {
        /// Line where the mismatch was found.
        line: usize,
        /// Column where the mismatch was found.
        column: usize,
        /// Which key or value does not fit.
        message: String,
    },
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::Truncated { line, column } => {
                write!(f, "the report is truncated: the JSON ends at line {line} column {column}")
            }
            ViewError::Syntax { line, column, message } => {
                write!(f, "the report is not JSON: {message} at line {line} column {column}")
            }
            ViewError::NotAReport { line, column, message } => write!(
                f,
                "the JSON is not a causeway report: {message} at line {line} column {column}"
            ),
        }
    }
}

impl std::error::Error for ViewError {}

impl From<serde_json::Error> for ViewError {
    fn from(error: serde_json::Error) -> ViewError {
        let (line, column) = (error.line(), error.column());
        let message = strip_position(&error.to_string());
        match error.classify() {
            serde_json::error::Category::Eof => ViewError::Truncated { line, column },
            serde_json::error::Category::Data => ViewError::NotAReport { line, column, message },
            serde_json::error::Category::Syntax | serde_json::error::Category::Io => {
                ViewError::Syntax { line, column, message }
            }
        }
    }
}

/// serde_json appends " at line L column C"; the error's own fields carry those.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// The parts of a report the page reads, with the types it relies on: checking a report
/// against this shape is what tells a report from other JSON.
#[derive(Deserialize)]
#[allow(dead_code)] // read by serde to check the shape; the page reads the values
struct ReportShape {
    scenario: String,
    ops: Vec<OpShape>,
    queues: Vec<QueueShape>,
    semaphores: Vec<SemaphoreShape>,
    stats: serde::de::IgnoredAny,
    /// Only in a run stopped at its deadline.
    #[serde(default)]
    timed_out: Option<TimedOutShape>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct TimedOutShape {
    at_ns: u64,
    timeout_ns: u64,
    reason: String,
    pending_waits: Vec<PendingWaitShape>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PendingWaitShape {
    op: String,
    semaphore: String,
    value: u64,
    at: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct OpShape {
    name: String,
    queue: String,
    epoch: u64,
    start_ns: u64,
    end_ns: u64,
    status: String,
    tainted: bool,
    frontier: Vec<PointShape>,
    waits: Vec<WaitShape>,
    /// Reports written before signals were recorded have none: the page then draws no edges.
    #[serde(default)]
    signals: Vec<SignalShape>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct PointShape {
    axis: String,
    epoch: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct WaitShape {
    semaphore: String,
    value: u64,
    resolution: String,
    tainted: bool,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct SignalShape {
    semaphore: String,
    value: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct QueueShape {
    name: String,
    driver: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct SemaphoreShape {
    name: String,
    value: u64,
    failed: bool,
    history: Vec<HistoryShape>,
    /// Reports written before truncation was counted have none: the page then says nothing
    /// was left out.
    #[serde(default)]
    history_truncated: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct HistoryShape {
    value: u64,
    tainted: bool,
    frontier: Vec<PointShape>,
}

/// Checks that `report` is a whole causeway report.
pub fn check(report: &[u8]) -> Result<(), ViewError> {
    serde_json::from_slice::<ReportShape>(report)?;
    Ok(())
}

/// What the page links to besides the run itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageLinks<'a> {
    /// The run's Perfetto trace, as the page should link to it (a path relative to the page,
    /// or a URL); `None` when the run has none.
    pub trace: Option<&'a str>,
}

/// Writes the page of `report` (checked with [`check`] first) to `out`.
pub fn write(report: &[u8], links: PageLinks<'_>, mut out: impl Write) -> Result<(), WriteError> {
    check(report).map_err(WriteError::Report)?;
    write_page(report, links, &mut out).map_err(WriteError::Io)
}

/// Why a page could not be written.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// The report is not one ([`check`]).
    Report(ViewError),
    /// Writing the page failed.
    Io(io::Error),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Report(error) => error.fmt(f),
            WriteError::Io(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for WriteError {}

fn write_page(report: &[u8], links: PageLinks<'_>, out: &mut impl Write) -> io::Result<()> {
    let trace = links.trace.map(attribute_escaped).unwrap_or_default();
    let mut rest = PAGE_HTML;
    for slot in [STYLE_SLOT, REPORT_SLOT, SCRIPT_SLOT] {
        let (before, after) = rest.split_once(slot).expect("page.html holds every slot once");
        out.write_all(before.replace(TRACE_SLOT, &trace).as_bytes())?;
        match slot {
            STYLE_SLOT => out.write_all(PAGE_CSS.as_bytes())?,
            SCRIPT_SLOT => out.write_all(PAGE_JS.as_bytes())?,
            _ => write_script_safe(report, out)?,
        }
        rest = after;
    }
    out.write_all(rest.replace(TRACE_SLOT, &trace).as_bytes())
}

/// Writes checked JSON compactly (the report is pretty-printed: its indentation would be half
/// the page) and so that it cannot end the `<script>` element it sits in: `<` only occurs
/// inside strings, where `\u003c` means the same.
fn write_script_safe(json: &[u8], out: &mut impl Write) -> io::Result<()> {
    let mut compact = Vec::with_capacity(64 * 1024);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if byte == b'"' {
            in_string = true;
        } else if byte.is_ascii_whitespace() {
            continue;
        }
        if byte == b'<' {
            compact.extend_from_slice(b"\\u003c");
        } else {
            compact.push(byte);
        }
        if compact.len() >= 60 * 1024 {
            out.write_all(&compact)?;
            compact.clear();
        }
    }
    out.write_all(&compact)
}

fn attribute_escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SMALL: &str = r#"{"scenario": "s</script>", "ops": [], "queues": [],
        "semaphores": [], "stats": {}}"#;

    #[test]
    fn a_report_cut_short_is_truncated() {
        let cut = &SMALL[..SMALL.len() - 10];
        assert!(matches!(check(cut.as_bytes()), Err(ViewError::Truncated { .. })));
    }

    #[test]
    fn other_json_is_not_a_report_and_names_the_missing_key() {
        let error = check(br#"{"traceEvents": []}"#).unwrap_err();
        assert!(matches!(error, ViewError::NotAReport { .. }), "{error:?}");
        assert!(error.to_string().contains("missing field `scenario`"), "{error}");
        let error = check(br#"{"scenario": 3}"#).unwrap_err();
        assert!(error.to_string().contains("invalid type"), "{error}");
    }

    #[test]
    fn a_timed_out_report_is_checked_too() {
        let with = |timed_out: &str| {
            SMALL.replace(r#""stats": {}"#, &format!(r#""stats": {{}}, "timed_out": {timed_out}"#))
        };
        let pending = r#"{"at": 0, "op": "a", "semaphore": "s", "value": 1}"#;
        let whole = format!(
            r#"{{"at_ns": 5, "pending_waits": [{pending}], "reason": "r", "timeout_ns": 1}}"#
        );
        check(with(&whole).as_bytes()).expect("a run stopped at its deadline is a report");
        let error = check(with(r#"{"at_ns": "soon"}"#).as_bytes()).unwrap_err();
        assert!(matches!(error, ViewError::NotAReport { .. }), "{error:?}");
        assert!(error.to_string().contains("invalid type: string \"soon\""), "{error}");
        let error = check(with(r#"{"at_ns": 5, "reason": "r", "timeout_ns": 1}"#).as_bytes());
        assert!(error.unwrap_err().to_string().contains("missing field `pending_waits`"));
    }

    #[test]
    fn text_is_a_syntax_error() {
        assert!(matches!(check(b"name = 'x'"), Err(ViewError::Syntax { .. })));
    }

    #[test]
    fn the_report_cannot_close_its_script_element() {
        let mut page = Vec::new();
        write(SMALL.as_bytes(), PageLinks { trace: Some("t\".json") }, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert_eq!(page.matches("</script>").count(), 2, "the data and the code elements");
        assert!(page.contains(r#"{"scenario":"s\u003c/script>","ops":[],"queues":[]"#), "compact");
        assert!(page.contains("t&quot;.json"));
        assert!(!page.contains(STYLE_SLOT) && !page.contains(SCRIPT_SLOT));
        assert!(!page.contains(REPORT_SLOT) && !page.contains(TRACE_SLOT));
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let text = "[ a<>\"\\\\/\n\t\u{2028}é]{0,12}";
        let leaf = prop_oneof![
            any::<u64>().prop_map(serde_json::Value::from),
            any::<bool>().prop_map(serde_json::Value::from),
            text.prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                prop::collection::btree_map(text, inner, 0..6)
                    .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_embedded_json_is_the_same_value_without_whitespace_or_a_tag_opener(
            value in json_value()
        ) {
            let pretty = serde_json::to_vec_pretty(&value).unwrap();
            let mut embedded = Vec::new();
            write_script_safe(&pretty, &mut embedded).unwrap();
            prop_assert!(!embedded.contains(&b'<'));
            prop_assert_eq!(embedded.len() <= serde_json::to_vec(&value).unwrap().len()
                + 5 * pretty.iter().filter(|&&b| b == b'<').count(), true);
            let back: serde_json::Value = serde_json::from_slice(&embedded).unwrap();
            prop_assert_eq!(back, value);
        }
    }
}
