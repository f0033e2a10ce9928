//! Fuzzes the scenario loader with raw bytes: `scenario::parse::parse`, then, for every scenario
//! it accepts, `scenario::check::check` (value checks and the deadlock simulation). Nothing runs:
//! no device, no threads. The loader reads a table at a time where it can cut the text at its
//! headers; every input is also read as one document (`parse::parse_document`, the reference),
//! and the two readings must accept the same texts as the same scenario.
//!
//! Scenario files come from users, so loading and checking must never panic, hang or take
//! unbounded memory (scripts/fuzz.sh runs this under libFuzzer's `-timeout` and
//! `-rss_limit_mb`), and every refusal must be a displayable error naming the file. The loader
//! takes `&str`: bytes that are not UTF-8 are read lossily (each bad sequence becomes U+FFFD),
//! so every input reaches the TOML parser.
#![no_main]

use std::path::Path;

use causeway_scenario::{check, parse, Scenario, ScenarioError};
use libfuzzer_sys::fuzz_target;

const PATH: &str = "fuzzed.toml";

fuzz_target!(|bytes: &[u8]| {
    let source = String::from_utf8_lossy(bytes);
    let parsed = parse::parse(Path::new(PATH), &source);
    assert_reads_as_one_document(&parsed, &source);
    match parsed {
        // `check` may hand back a plan on success; only its refusals matter here.
        Ok(scenario) => {
            if let Err(error) = check::check(&scenario) {
                assert_names_the_file(&error);
            }
        }
        Err(error) => assert_names_the_file(&error),
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

fn assert_names_the_file(error: &ScenarioError) {
    let shown = error.to_string();
    assert!(shown.starts_with(PATH), "{shown}");
}
