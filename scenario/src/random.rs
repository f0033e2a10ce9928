//! Random valid scenarios with failures, as TOML text, for the differential test
//! (`cli/tests/differential.rs`, issue 42): queues of the CPU, NPU and Vulkan drivers, cross-queue
//! waits, and failures at every moment.
//!
//! Every scenario is valid by construction: each wait is on a value that an operation earlier
//! in file order signals (or that the semaphore starts at), and signals advance their
//! semaphores. So the earliest unfinished operation in file order can always go on — its waits'
//! signallers were submitted before it, and they end, reaching their values or failing them —
//! and [`check`](super::check::check) accepts the file. The same seed gives the same text.
//!
//! What a scenario mixes, each chosen at random:
//!
//! - one to three CPU queues (some with `wait_before_signal = false`, so their early waits are
//!   held), and where the [`Mix`] asks for them one or two NPU queues and one or two Vulkan
//!   queues; one to three workers;
//! - work of 0–2000 µs so that timings interleave: `spin`, `sleep` (CPU queues), `noop`, `host`
//!   functions on any driver's queue, some failing with an application code, and `compute`
//!   (NPU, Vulkan) and `copy` (Vulkan) kernels, which those drivers issue ahead and order with
//!   native waits;
//! - up to three waits per operation, on the latest value of a semaphore or an older one (which
//!   a later signal may cover), and up to two signals, some of them on semaphores that have
//!   failed by then;
//! - host steps: waits and signals of the host itself, `fail = "s"` anywhere in file order —
//!   before the signaller is submitted, while it runs, or after a wait on it — and, where the
//!   [`Mix`] allows, `cancel` steps rejecting a queue's work past an epoch.

use std::fmt::Write;

/// What a random scenario may contain, and how long it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    /// One or two NPU queues (the software NPU model).
    pub npu: bool,
    /// One or two Vulkan queues (a Vulkan device opens for the run).
    pub vulkan: bool,
    /// `cancel` host steps (rejected speculation).
    pub cancel: bool,
    /// Most operations, host steps included (at least three are written).
    pub max_ops: usize,
}

/// The driver of a generated queue, as the scenario names it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Driver {
    Cpu,
    Npu,
    Vulkan,
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Cpu => "cpu",
            Driver::Npu => "npu",
            Driver::Vulkan => "vulkan",
        }
    }
}

/// SplitMix64: small, fast and good enough to spread scenarios, with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    /// An index below `count` (which is not 0).
    fn index(&mut self, count: usize) -> usize {
        (self.next() % count as u64) as usize
    }

    fn percent(&mut self, chance: u64) -> bool {
        self.next() % 100 < chance
    }

    /// A choice weighted by `weights` (not all zero): the index of the one picked.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut pick = self.next() % weights.iter().sum::<u64>();
        for (index, &weight) in weights.iter().enumerate() {
            if pick < weight {
                return index;
            }
            pick -= weight;
        }
        weights.len() - 1
    }
}

/// What the generator knows of a semaphore while it writes the file.
struct Semaphore {
    /// The highest value signalled so far in the file (its initial value before any signal).
    last: u64,
}

/// A random valid scenario (see the [module documentation](self)) from `seed`.
pub fn scenario(seed: u64, mix: Mix) -> String {
    let mut rng = Rng(seed);
    let mut text = format!(
        "name = \"differential-{seed}\"\ndescription = \"random scenario with failures, seed \
         {seed}\"\nworkers = {}\n\n",
        rng.between(1, 3)
    );
    let mut queues: Vec<(String, Driver)> = Vec::new();
    for index in 0..rng.between(1, 3) {
        queues.push((format!("cpu{index}"), Driver::Cpu));
    }
    for (wanted, driver, prefix) in
        [(mix.npu, Driver::Npu, "npu"), (mix.vulkan, Driver::Vulkan, "vk")]
    {
        if wanted {
            for index in 0..rng.between(1, 2) {
                queues.push((format!("{prefix}{index}"), driver));
            }
        }
    }
    for (name, driver) in &queues {
        let _ = writeln!(text, "[[queue]]\nname = \"{name}\"\ndriver = \"{}\"", driver.name());
        if *driver == Driver::Cpu && rng.percent(15) {
            text.push_str("wait_before_signal = false\n");
        }
        text.push('\n');
    }
    let mut semaphores: Vec<Semaphore> = Vec::new();
    for index in 0..rng.between(2, 5) {
        let initial = if rng.percent(20) { rng.between(1, 2) } else { 0 };
        let _ = writeln!(text, "[[semaphore]]\nname = \"s{index}\"\ninitial = {initial}\n");
        semaphores.push(Semaphore { last: initial });
    }
    // Operations submitted so far per queue: a `cancel` step rejects work past one of them.
    let mut submitted = vec![0u64; queues.len()];
    let ops = rng.between(3, mix.max_ops.max(3) as u64);
    for index in 0..ops {
        let _ = writeln!(text, "[[op]]\nname = \"op{index}\"");
        if rng.percent(25) {
            host_step(&mut rng, &mut text, &mut semaphores, &queues, &submitted, mix);
        } else {
            let queue = rng.index(queues.len());
            submitted[queue] += 1;
            let (name, driver) = &queues[queue];
            let _ = writeln!(text, "queue = \"{name}\"");
            conditions(&mut rng, &mut text, &mut semaphores, 3);
            let _ = writeln!(text, "work = {}", queue_work(&mut rng, *driver));
        }
        text.push('\n');
    }
    text
}

/// A host step's fields after its name: a failure of a semaphore (after waiting, sometimes), a
/// rejection of speculation, or waits and signals of the host's own.
fn host_step(
    rng: &mut Rng,
    text: &mut String,
    semaphores: &mut [Semaphore],
    queues: &[(String, Driver)],
    submitted: &[u64],
    mix: Mix,
) {
    text.push_str("queue = \"host\"\n");
    match rng.weighted(&[45, 40, if mix.cancel { 15 } else { 0 }]) {
        0 => {
            // Half of the failures come after a wait, so they fall after a signal was reached
            // as well as before or while its signaller runs.
            if rng.percent(50) {
                waits(rng, text, semaphores, 1);
            }
            let _ = writeln!(text, "fail = \"s{}\"", rng.index(semaphores.len()));
            if rng.percent(50) {
                let _ = writeln!(text, "failure_code = {}", rng.between(2, 9));
            }
        }
        1 => {
            conditions(rng, text, semaphores, 2);
            let work = match rng.weighted(&[50, 25, 25]) {
                0 => "{ kind = \"noop\" }".to_string(),
                1 => format!("{{ kind = \"spin\", us = {} }}", rng.between(0, 500)),
                _ => format!("{{ kind = \"sleep\", us = {} }}", rng.between(0, 500)),
            };
            let _ = writeln!(text, "work = {work}");
        }
        _ => {
            let queue = rng.index(queues.len());
            let after = rng.between(0, submitted[queue]);
            let _ =
                writeln!(text, "cancel = {{ axis = \"{}\", after = {after} }}", queues[queue].0);
        }
    }
}

/// Up to `most_waits` waits, then up to two signals on distinct semaphores, each advancing its
/// semaphore by one or two (so that some waits fall between two signals).
fn conditions(rng: &mut Rng, text: &mut String, semaphores: &mut [Semaphore], most_waits: u64) {
    let count = rng.weighted(&[25, 40, 25, 10]) as u64;
    waits(rng, text, semaphores, count.min(most_waits));
    let count = rng.weighted(&[25, 55, 20]).min(semaphores.len());
    let mut chosen: Vec<usize> = Vec::with_capacity(count);
    while chosen.len() < count {
        let semaphore = rng.index(semaphores.len());
        if !chosen.contains(&semaphore) {
            chosen.push(semaphore);
        }
    }
    if chosen.is_empty() {
        return;
    }
    let signals: Vec<String> = chosen
        .iter()
        .map(|&semaphore| {
            let value = semaphores[semaphore].last + rng.between(1, 2);
            semaphores[semaphore].last = value;
            format!("\"s{semaphore}={value}\"")
        })
        .collect();
    let _ = writeln!(text, "signal = [{}]", signals.join(", "));
}

/// `count` waits, each on a value some earlier operation signals (or the initial value): the
/// latest one half the time, so that many are still pending when the waiter is submitted.
fn waits(rng: &mut Rng, text: &mut String, semaphores: &[Semaphore], count: u64) {
    let signalled: Vec<usize> = (0..semaphores.len()).filter(|&s| semaphores[s].last > 0).collect();
    if signalled.is_empty() || count == 0 {
        return;
    }
    let waits: Vec<String> = (0..count)
        .map(|_| {
            let semaphore = signalled[rng.index(signalled.len())];
            let last = semaphores[semaphore].last;
            let value = if rng.percent(50) { last } else { rng.between(1, last) };
            format!("\"s{semaphore}>={value}\"")
        })
        .collect();
    let _ = writeln!(text, "wait = [{}]", waits.join(", "));
}

/// Work a queue of `driver` runs: 0–2000 µs of it where it takes time, and a host function that
/// fails one time in four.
fn queue_work(rng: &mut Rng, driver: Driver) -> String {
    let us = rng.between(0, 2000);
    let host = |rng: &mut Rng| {
        if rng.percent(25) {
            format!("{{ kind = \"host\", us = {us}, fail = {} }}", rng.between(1, 9))
        } else {
            format!("{{ kind = \"host\", us = {us} }}")
        }
    };
    let compute = |rng: &mut Rng| {
        let kernel = if rng.percent(50) { "add" } else { "saxpy" };
        format!(
            "{{ kind = \"compute\", kernel = \"{kernel}\", elements = {}, tiles = {}, regions = {} }}",
            rng.between(64, 1024),
            rng.between(1, 4),
            rng.between(1, 3)
        )
    };
    match driver {
        Driver::Cpu => match rng.weighted(&[20, 30, 20, 30]) {
            0 => "{ kind = \"noop\" }".to_string(),
            1 => format!("{{ kind = \"spin\", us = {us} }}"),
            2 => format!("{{ kind = \"sleep\", us = {us} }}"),
            _ => host(rng),
        },
        Driver::Npu => match rng.weighted(&[25, 45, 30]) {
            0 => "{ kind = \"noop\" }".to_string(),
            1 => host(rng),
            _ => compute(rng),
        },
        Driver::Vulkan => match rng.weighted(&[25, 40, 25, 10]) {
            0 => "{ kind = \"noop\" }".to_string(),
            1 => host(rng),
            2 => compute(rng),
            _ => format!("{{ kind = \"copy\", bytes = {} }}", 4 * rng.between(64, 1024)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::check::check;
    use crate::parse::parse;

    const EVERYTHING: Mix = Mix { npu: true, vulkan: true, cancel: true, max_ops: 24 };

    #[test]
    fn the_same_seed_writes_the_same_scenario() {
        assert_eq!(scenario(7, EVERYTHING), scenario(7, EVERYTHING));
        assert_ne!(scenario(7, EVERYTHING), scenario(8, EVERYTHING));
    }

    #[test]
    fn every_generated_scenario_loads_and_passes_the_checker() {
        for seed in 0..500 {
            let text = scenario(seed, EVERYTHING);
            let scenario = parse(Path::new("random.toml"), &text)
                .unwrap_or_else(|error| panic!("seed {seed}: {error}\n{text}"));
            check(&scenario).unwrap_or_else(|error| panic!("seed {seed}: {error}\n{text}"));
            assert!((3..=24).contains(&scenario.ops.len()), "seed {seed}");
        }
    }

    #[test]
    fn only_the_drivers_asked_for_appear() {
        let cpu_only = Mix { npu: false, vulkan: false, cancel: false, max_ops: 24 };
        for seed in 0..100 {
            let text = scenario(seed, cpu_only);
            assert!(!text.contains("driver = \"npu\"") && !text.contains("driver = \"vulkan\""));
            assert!(!text.contains("cancel ="), "seed {seed}");
        }
        let mixed = (0..100).map(|seed| scenario(seed, EVERYTHING));
        assert!(mixed.clone().all(|text| text.contains("driver = \"vulkan\"")));
        assert!(mixed.clone().any(|text| text.contains("fail = \"s")));
        assert!(mixed.clone().any(|text| text.contains("cancel =")));
        assert!(mixed.clone().any(|text| text.contains("kind = \"compute\"")));
    }
}
