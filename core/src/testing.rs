//! Shared configuration for core's property tests.

use proptest::test_runner::Config;

/// Property-test settings: the default locally; under Miri few cases (it interprets every
/// instruction) and no failure files (Miri isolates the filesystem).
pub(crate) fn proptest_config() -> Config {
    if cfg!(miri) {
        Config { cases: 4, failure_persistence: None, ..Config::default() }
    } else {
        Config::default()
    }
}
