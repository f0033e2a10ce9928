//! Fuzzes the scenario loader with raw bytes: `scenario::parse::parse`, then, for every scenario
//! it accepts, `scenario::check::check` (value checks and the deadlock simulation). Nothing runs:
//! no device, no threads.
//!
//! Scenario files come from users, so loading and checking must never panic, hang or take
//! unbounded memory (scripts/fuzz.sh runs this under libFuzzer's `-timeout` and
//! `-rss_limit_mb`), and every refusal must be a displayable error naming the file. The loader
//! takes `&str`: bytes that are not UTF-8 are read lossily (each bad sequence becomes U+FFFD),
//! so every input reaches the TOML parser.
#![no_main]

use std::path::Path;

use causeway::scenario::{check, parse, ScenarioError};
use libfuzzer_sys::fuzz_target;

const PATH: &str = "fuzzed.toml";

fuzz_target!(|bytes: &[u8]| {
    let source = String::from_utf8_lossy(bytes);
    match parse::parse(Path::new(PATH), &source) {
        // `check` may hand back a plan on success; only its refusals matter here.
        Ok(scenario) => {
            if let Err(error) = check::check(&scenario) {
                assert_names_the_file(&error);
            }
        }
        Err(error) => assert_names_the_file(&error),
    }
});

fn assert_names_the_file(error: &ScenarioError) {
    let shown = error.to_string();
    assert!(shown.starts_with(PATH), "{shown}");
}
