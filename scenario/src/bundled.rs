//! The scenarios shipped in `scenarios/` and the graphs shipped in `graphs/`, compiled in so
//! that `causeway run <name>`, `causeway schedule <name>` and `causeway scenarios` work from any
//! directory; and how a name given to those commands is resolved ([`resolve`]).

use std::path::{Component, Path, PathBuf};

use super::model::{Scenario, ScenarioError};

/// One bundled scenario or graph file.
#[derive(Clone, Copy, Debug)]
pub struct Bundled {
    /// Its name (the file stem): what runs it from the command line.
    pub name: &'static str,
    /// Its path in the repository.
    pub file: &'static str,
    /// Its text.
    pub source: &'static str,
}

impl Bundled {
    /// The scenario it holds, its problems reported against its name (the path it came from
    /// in the repository need not exist where it runs).
    pub fn scenario(&self) -> Result<Scenario, ScenarioError> {
        super::parse::parse(Path::new(self.name), self.source)
    }

    /// The scenario's one-line description.
    pub fn summary(&self) -> String {
        self.scenario()
            .map_or_else(|error| format!("(invalid: {error})"), |scenario| scenario.description)
    }
}

macro_rules! bundled {
    ($folder:literal: $($name:literal),* $(,)?) => {
        &[$(Bundled {
            name: $name,
            file: concat!($folder, "/", $name, ".toml"),
            // `scenario/scenarios` and `scenario/graphs` link to the repository's folders, so
            // the files are inside this package and ship with it.
            source: include_str!(concat!("../", $folder, "/", $name, ".toml")),
        }),*]
    };
}

/// Every bundled scenario: first the eight comparisons of binary events, timelines and
/// frontiers, then the workload scenarios.
pub const ALL: &[Bundled] = bundled![
    "scenarios":
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

/// Every bundled graph (`causeway schedule <name>`).
pub const ALL_GRAPHS: &[Bundled] =
    bundled!["graphs": "fork-join", "transformer-block", "multi-device-pipeline", "while-refine"];

/// The bundled scenario called `name` (its bare name: no folder, no extension).
pub fn find(name: &str) -> Option<&'static Bundled> {
    ALL.iter().find(|scenario| scenario.name == name)
}

/// What a bare name given to a command may stand for.
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// What one is called in messages.
    noun: &'static str,
    /// The command that takes one.
    command: &'static str,
    /// The bundled ones.
    all: &'static [Bundled],
}

/// Scenarios, as `causeway run` takes them.
pub const SCENARIO: Kind = Kind { noun: "scenario", command: "causeway run", all: ALL };

/// Graphs, as `causeway schedule` takes them.
pub const GRAPH: Kind = Kind { noun: "graph", command: "causeway schedule", all: ALL_GRAPHS };

/// What a name given on the command line stands for.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A file: the path exists (or cannot be looked at, which reading it will report).
    File(&'a Path),
    /// A bundled file, named bare.
    Bundled(&'static Bundled),
}

/// Resolves `given`, a scenario or graph file as `kind` says, by one rule: a path that exists
/// is a file; a bare name (no folder, no extension) is a bundled one; anything else is an
/// error that says what was tried — never a bundled file that happens to share a missing
/// path's stem, which would run something other than what was asked for.
pub fn resolve(given: &Path, kind: Kind) -> Result<Source<'_>, ScenarioError> {
    if given.try_exists().unwrap_or(true) {
        return Ok(Source::File(given));
    }
    let bare = given.file_name() == Some(given.as_os_str()) && given.extension().is_none();
    if bare {
        let name = given.to_string_lossy();
        if let Some(found) = kind.all.iter().find(|bundled| bundled.name == name) {
            return Ok(Source::Bundled(found));
        }
    }
    let here = std::env::current_dir().map_or_else(|_| given.to_path_buf(), |dir| dir.join(given));
    let here: PathBuf = here.components().filter(|part| *part != Component::CurDir).collect();
    let names: Vec<&str> = kind.all.iter().map(|bundled| bundled.name).collect();
    let (noun, command, listed) = (kind.noun, kind.command, names.join(", "));
    let stem = given.file_stem().map(|stem| stem.to_string_lossy());
    let instead = match stem {
        _ if bare => format!(", and no bundled {noun} of that name (bundled: {listed})"),
        Some(stem) if names.contains(&&*stem) => format!(
            "; a bundled {noun} is named bare, without folder or extension: `{command} {stem}`"
        ),
        _ => format!(
            "; a bundled {noun} is named bare, without folder or extension (bundled: {listed})"
        ),
    };
    let message = format!("no such file (looked for {}){instead}", here.display());
    Err(ScenarioError::in_file(given, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `folder` is bundled in `bundled`, and nothing else.
    fn bundles_the_folder(folder: &str, bundled: &[Bundled]) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(folder);
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
            .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut names: Vec<&str> = bundled.iter().map(|b| b.name).collect();
        names.sort_unstable();
        assert_eq!(on_disk, names, "{folder}/");
    }

    #[test]
    fn every_scenario_and_graph_file_is_bundled() {
        bundles_the_folder("scenarios", ALL);
        bundles_the_folder("graphs", ALL_GRAPHS);
    }
}
