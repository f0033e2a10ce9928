//! The scenarios shipped in `scenarios/`, compiled in so `causeway run <name>` and
//! `causeway scenarios` work from any directory.

use std::path::Path;

/// One bundled scenario file.
#[derive(Clone, Copy, Debug)]
pub struct Bundled {
    /// Its name (the file stem).
    pub name: &'static str,
    /// Its path in the repository.
    pub file: &'static str,
    /// Its text.
    pub source: &'static str,
}

impl Bundled {
    /// The scenario's one-line description.
    pub fn summary(&self) -> String {
        super::parse::parse(Path::new(self.file), self.source)
            .map_or_else(|error| format!("(invalid: {error})"), |scenario| scenario.description)
    }
}

macro_rules! bundled {
    ($($name:literal),* $(,)?) => {
        &[$(Bundled {
            name: $name,
            file: concat!("scenarios/", $name, ".toml"),
            source: include_str!(concat!("../../../scenarios/", $name, ".toml")),
        }),*]
    };
}

/// Every bundled scenario: first the eight comparisons of binary events, timelines and
/// frontiers, then the workload scenarios.
pub const ALL: &[Bundled] = bundled![
    "sequential",
    "cross-queue",
    "fork-join",
    "transitive",
    "cross-driver",
    "cpu-npu-vulkan",
    "remote-pipeline",
    "buffer-reuse",
    "independent",
    "speculation",
    "speculation-cascade",
    "pipeline",
    "late-waiter",
    "multi-domain",
    "spec-decode",
    "kv-paging",
    "multi-modal",
    "voice-chat",
    "rag-pipeline",
    "multi-model",
    "streaming-translation",
    "tensor-parallel",
];

/// The bundled scenario called `name` (with or without `.toml` or the `scenarios/` prefix).
pub fn find(name: &str) -> Option<&'static Bundled> {
    let stem = name.trim_start_matches("scenarios/").trim_end_matches(".toml");
    ALL.iter().find(|scenario| scenario.name == stem)
}
