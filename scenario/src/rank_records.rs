//! A rank's records of a run as bytes, for sending to rank 0, which [`gather`]s them.
//!
//! Little-endian, a version byte first; every list is counted, every operation carries its own
//! waits and frontier and every semaphore its own history, so a decoded outcome's shared
//! arrays are rebuilt in order and no span can point outside them. Frontier points name their
//! axes by index into the rank's table of axis names, sent once. The bytes come from another
//! process: every malformation is a typed [`RecordsError`], nothing panics.
//!
//! [`gather`]: super::gather::gather

use std::fmt;
use std::time::Duration;

use causeway_core::queue::Resolution;

use super::model::{DriverKind, Scenario};
use super::outcome::{
    ComputeRecord, CudaRecord, FrontierRecord, HistoryRecord, NpuRecord, OpRecord, Outcome,
    PointRecord, QueueRecord, SemaphoreRecord, Span, Speculation, Status, VulkanRecord, WaitRecord,
};

/// The encoding's version: the first byte.
const VERSION: u8 = 3;

/// Why bytes are not a rank's records (or records cannot be encoded).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordsError {
    /// They end before the records do.
    Truncated,
    /// Bytes follow the records.
    Trailing,
    /// Another version of the encoding.
    Version(u8),
    /// A field holds a value it cannot: named.
    Invalid(&'static str),
    /// A wait resolved in a way this encoding has no byte for.
    Unencodable,
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordsError::Truncated => f.write_str("a rank's records end early"),
            RecordsError::Trailing => f.write_str("bytes follow a rank's records"),
            RecordsError::Version(version) => {
                write!(f, "a rank's records are in version {version}, not {VERSION}")
            }
            RecordsError::Invalid(field) => write!(f, "a rank's records hold an invalid {field}"),
            RecordsError::Unencodable => f.write_str("a wait resolution has no encoding"),
        }
    }
}

impl std::error::Error for RecordsError {}

fn resolution_byte(resolution: Option<Resolution>) -> Result<u8, RecordsError> {
    Ok(match resolution {
        None => 0,
        Some(Resolution::Elided) => 1,
        Some(Resolution::Satisfied) => 2,
        Some(Resolution::DeviceWait) => 3,
        Some(Resolution::Held) => 4,
        Some(_) => return Err(RecordsError::Unencodable),
    })
}

/// 0: no cancel step found it; else 1 + conservative + 2 × started.
fn speculation_byte(speculation: Option<Speculation>) -> u8 {
    speculation.map_or(0, |found| 1 + u8::from(found.conservative) + 2 * u8::from(found.started))
}

fn status_byte(status: Status) -> u8 {
    match status {
        Status::Ok => 0,
        Status::Failed => 1,
        Status::Cancelled => 2,
        Status::Running => 3,
        Status::NotStarted => 4,
    }
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }
    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn len(&mut self, len: usize) {
        self.u64(len as u64);
    }
    fn str(&mut self, text: &str) {
        self.len(text.len());
        self.0.extend_from_slice(text.as_bytes());
    }
    fn frontier(&mut self, outcome: &Outcome<'_>, frontier: FrontierRecord) {
        let points = outcome.points_of(frontier);
        self.len(points.len());
        for point in points {
            self.u32(point.axis);
            self.u64(point.epoch);
        }
        self.bool(frontier.tainted);
    }
}

/// Encodes `outcome` (this rank's records of the run) for [`decode`] on rank 0.
pub fn encode(outcome: &Outcome<'_>) -> Result<Vec<u8>, RecordsError> {
    let mut out = Writer(vec![VERSION]);
    out.len(outcome.axis_names.len());
    for name in &outcome.axis_names {
        out.str(name);
    }
    out.len(outcome.ops.len());
    for op in &outcome.ops {
        for value in [op.epoch, op.submit_ns, op.start_ns, op.end_ns] {
            out.u64(value);
        }
        let waits = outcome.waits_of(op);
        out.len(waits.len());
        for wait in waits {
            out.u32(wait.semaphore);
            out.u64(wait.value);
            out.u8(resolution_byte(wait.resolution)?);
            out.bool(wait.tainted);
        }
        out.frontier(outcome, op.frontier);
        out.bool(op.worker.is_some());
        out.u32(op.worker.unwrap_or(0));
        out.bool(op.queued);
        out.u8(status_byte(op.status));
        out.u8(speculation_byte(op.speculation));
    }
    out.len(outcome.semaphores.len());
    for semaphore in &outcome.semaphores {
        out.u64(semaphore.value);
        out.bool(semaphore.failed);
        let history = outcome.history_of(semaphore);
        out.len(history.len());
        for entry in history {
            out.u64(entry.value);
            out.frontier(outcome, entry.frontier);
            out.bool(entry.tainted);
            out.bool(entry.cancelled);
            out.bool(entry.ran_on_rejected);
        }
    }
    let memory = outcome.memory;
    for value in [
        memory.commits,
        memory.reused,
        memory.reuse_declined,
        memory.over_quota_waits,
        memory.peak_committed,
    ] {
        out.u64(value);
    }
    out.u64(u64::try_from(outcome.wall.as_nanos()).unwrap_or(u64::MAX));
    out.len(outcome.queues.len());
    for queue in &outcome.queues {
        let driver = DriverKind::ALL.iter().position(|&kind| kind == queue.driver);
        out.u8(driver.map_or(u8::MAX, |k| k as u8));
        out.str(&queue.adapter);
    }
    out.len(outcome.compute.len());
    for check in &outcome.compute {
        out.len(check.op);
        match &check.result {
            None => out.u8(0),
            Some(Ok(())) => out.u8(1),
            Some(Err(wrong)) => {
                out.u8(2);
                out.str(wrong);
            }
        }
    }
    out.bool(outcome.vulkan.is_some());
    if let Some(vulkan) = &outcome.vulkan {
        out.str(&vulkan.adapter);
        out.u64(vulkan.native_waits);
        out.len(vulkan.validation_messages.len());
        for message in &vulkan.validation_messages {
            out.str(message);
        }
    }
    out.bool(outcome.npu.is_some());
    if let Some(npu) = outcome.npu {
        out.str(npu.adapter);
        for value in [npu.wait_descriptors, npu.elided, npu.held, npu.ring_full] {
            out.u64(value);
        }
    }
    out.bool(outcome.cuda.is_some());
    if let Some(cuda) = &outcome.cuda {
        out.str(&cuda.adapter);
        for value in [cuda.native_waits, cuda.completed, cuda.elided, cuda.held] {
            out.u64(value);
        }
    }
    Ok(out.0)
}

struct Reader<'b> {
    bytes: &'b [u8],
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], RecordsError> {
        if self.bytes.len() < n {
            return Err(RecordsError::Truncated);
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(taken)
    }
    fn u8(&mut self) -> Result<u8, RecordsError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self, field: &'static str) -> Result<bool, RecordsError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(RecordsError::Invalid(field)),
        }
    }
    fn u32(&mut self) -> Result<u32, RecordsError> {
        let mut word = [0; 4];
        word.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(word))
    }
    fn u64(&mut self) -> Result<u64, RecordsError> {
        let mut word = [0; 8];
        word.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(word))
    }
    /// A count of items of at least `item_bytes` each: never more than the bytes left hold,
    /// so a forged count cannot make the reader reserve memory the message does not back.
    fn len(&mut self, item_bytes: usize) -> Result<usize, RecordsError> {
        let len = usize::try_from(self.u64()?).map_err(|_| RecordsError::Truncated)?;
        if len.saturating_mul(item_bytes.max(1)) > self.bytes.len() {
            return Err(RecordsError::Truncated);
        }
        Ok(len)
    }
    fn string(&mut self) -> Result<String, RecordsError> {
        let len = self.len(1)?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| RecordsError::Invalid("text"))
    }
    fn frontier(
        &mut self,
        axes: usize,
        points: &mut Vec<PointRecord>,
    ) -> Result<FrontierRecord, RecordsError> {
        let count = self.len(12)?;
        let start = points.len();
        for _ in 0..count {
            let axis = self.u32()?;
            if axis as usize >= axes {
                return Err(RecordsError::Invalid("frontier axis"));
            }
            points.push(PointRecord { axis, epoch: self.u64()? });
        }
        let tainted = self.bool("frontier taint")?;
        Ok(FrontierRecord { points: Span::since(points, start), tainted })
    }
}

/// Decodes a rank's records of a run of `scenario` (bytes [`encode`] made on that rank),
/// checking them against the scenario: one record per operation, semaphore and queue, waits
/// and checks naming the scenario's semaphores and operations.
pub fn decode<'s>(scenario: &'s Scenario, bytes: &[u8]) -> Result<Outcome<'s>, RecordsError> {
    let mut input = Reader { bytes };
    let version = input.u8()?;
    if version != VERSION {
        return Err(RecordsError::Version(version));
    }
    let axis_count = input.len(8)?;
    let mut axis_names = Vec::with_capacity(axis_count);
    for _ in 0..axis_count {
        axis_names.push(input.string()?);
    }
    let mut points = Vec::new();

    let op_count = input.len(8)?;
    if op_count != scenario.ops.len() {
        return Err(RecordsError::Invalid("operation count"));
    }
    let (mut ops, mut waits) = (Vec::with_capacity(op_count), Vec::new());
    for _ in 0..op_count {
        let (epoch, submit_ns, start_ns, end_ns) =
            (input.u64()?, input.u64()?, input.u64()?, input.u64()?);
        let wait_count = input.len(14)?;
        let start = waits.len();
        for _ in 0..wait_count {
            let semaphore = input.u32()?;
            if semaphore as usize >= scenario.semaphores.len() {
                return Err(RecordsError::Invalid("wait semaphore"));
            }
            let value = input.u64()?;
            let resolution = match input.u8()? {
                0 => None,
                1 => Some(Resolution::Elided),
                2 => Some(Resolution::Satisfied),
                3 => Some(Resolution::DeviceWait),
                4 => Some(Resolution::Held),
                _ => return Err(RecordsError::Invalid("wait resolution")),
            };
            let tainted = input.bool("wait taint")?;
            waits.push(WaitRecord { semaphore, value, resolution, tainted });
        }
        let waits_span = Span::since(&waits, start);
        let frontier = input.frontier(axis_names.len(), &mut points)?;
        let has_worker = input.bool("worker")?;
        let worker = input.u32()?;
        let queued = input.bool("queued")?;
        let status = match input.u8()? {
            0 => Status::Ok,
            1 => Status::Failed,
            2 => Status::Cancelled,
            3 => Status::Running,
            4 => Status::NotStarted,
            _ => return Err(RecordsError::Invalid("status")),
        };
        let speculation = match input.u8()? {
            0 => None,
            code @ 1..=4 => {
                Some(Speculation { conservative: (code - 1) & 1 == 1, started: code >= 3 })
            }
            _ => return Err(RecordsError::Invalid("speculation")),
        };
        ops.push(OpRecord {
            epoch,
            submit_ns,
            start_ns,
            end_ns,
            waits: waits_span,
            frontier,
            worker: has_worker.then_some(worker),
            queued,
            status,
            speculation,
        });
    }

    let semaphore_count = input.len(17)?;
    if semaphore_count != scenario.semaphores.len() {
        return Err(RecordsError::Invalid("semaphore count"));
    }
    let (mut semaphores, mut history) = (Vec::with_capacity(semaphore_count), Vec::new());
    for _ in 0..semaphore_count {
        let value = input.u64()?;
        let failed = input.bool("semaphore failure")?;
        let entries = input.len(18)?;
        let start = history.len();
        for _ in 0..entries {
            let value = input.u64()?;
            let frontier = input.frontier(axis_names.len(), &mut points)?;
            let tainted = input.bool("history taint")?;
            let cancelled = input.bool("history cancellation")?;
            let ran_on_rejected = input.bool("history rejection")?;
            history.push(HistoryRecord { value, frontier, tainted, cancelled, ran_on_rejected });
        }
        semaphores.push(SemaphoreRecord { value, failed, history: Span::since(&history, start) });
    }

    // Fields are read in the order they are written (initialisers run in source order).
    let memory = causeway::device::MemoryStats {
        commits: input.u64()?,
        reused: input.u64()?,
        reuse_declined: input.u64()?,
        over_quota_waits: input.u64()?,
        peak_committed: input.u64()?,
    };
    let wall = Duration::from_nanos(input.u64()?);

    let queue_count = input.len(9)?;
    if queue_count != scenario.queues.len() {
        return Err(RecordsError::Invalid("queue count"));
    }
    let mut queues = Vec::with_capacity(queue_count);
    for _ in 0..queue_count {
        let driver = *DriverKind::ALL
            .get(usize::from(input.u8()?))
            .ok_or(RecordsError::Invalid("queue driver"))?;
        queues.push(QueueRecord { driver, adapter: input.string()? });
    }

    let check_count = input.len(9)?;
    let mut compute = Vec::with_capacity(check_count);
    for _ in 0..check_count {
        let op = usize::try_from(input.u64()?).map_err(|_| RecordsError::Invalid("check"))?;
        if op >= scenario.ops.len() {
            return Err(RecordsError::Invalid("checked operation"));
        }
        let result = match input.u8()? {
            0 => None,
            1 => Some(Ok(())),
            2 => Some(Err(input.string()?)),
            _ => return Err(RecordsError::Invalid("check result")),
        };
        compute.push(ComputeRecord { op, result });
    }

    let vulkan = if input.bool("vulkan record")? {
        let adapter = input.string()?;
        let native_waits = input.u64()?;
        let count = input.len(8)?;
        let mut validation_messages = Vec::with_capacity(count);
        for _ in 0..count {
            validation_messages.push(input.string()?);
        }
        Some(VulkanRecord { adapter, native_waits, validation_messages })
    } else {
        None
    };
    let npu = if input.bool("npu record")? {
        // Every rank runs the same software model: its name is this binary's.
        if input.string()? != super::drivers::NPU_ADAPTER {
            return Err(RecordsError::Invalid("npu adapter"));
        }
        Some(NpuRecord {
            adapter: super::drivers::NPU_ADAPTER,
            wait_descriptors: input.u64()?,
            elided: input.u64()?,
            held: input.u64()?,
            ring_full: input.u64()?,
        })
    } else {
        None
    };
    let cuda = if input.bool("cuda record")? {
        Some(CudaRecord {
            adapter: input.string()?,
            native_waits: input.u64()?,
            completed: input.u64()?,
            elided: input.u64()?,
            held: input.u64()?,
        })
    } else {
        None
    };
    if !input.bytes.is_empty() {
        return Err(RecordsError::Trailing);
    }
    Ok(Outcome {
        scenario,
        ops,
        waits,
        semaphores,
        history,
        points,
        axis_names,
        memory,
        wall,
        queues,
        compute,
        vulkan,
        npu,
        cuda,
        // A share stopped at its deadline sends its error, never records.
        timed_out: None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::run::RunOptions;
    use crate::{bundled, check, parse, report, run};

    fn outcome_of(scenario: &Scenario) -> Outcome<'_> {
        let plan = check::check(scenario).expect("checked");
        let options =
            RunOptions { timeout: Duration::from_secs(60), progress: false, all_cpu: true };
        run::run(scenario, &plan, options).expect("ran")
    }

    fn scenario(name: &str) -> Scenario {
        let found = bundled::find(name).expect("bundled");
        parse::parse(Path::new(found.file), found.source).expect("valid")
    }

    fn report_of(outcome: &Outcome<'_>) -> String {
        let mut bytes = Vec::new();
        report::write(outcome, &mut bytes).expect("report");
        String::from_utf8(bytes).expect("utf-8")
    }

    #[test]
    fn every_bundled_outcome_round_trips_to_the_same_report() {
        for found in bundled::ALL {
            let scenario = scenario(found.name);
            let outcome = outcome_of(&scenario);
            let bytes = encode(&outcome).expect("encodes");
            let decoded = decode(&scenario, &bytes).expect("decodes");
            assert_eq!(report_of(&decoded), report_of(&outcome), "{}", found.name);
            assert_eq!(decoded.compute, outcome.compute, "{}", found.name);
            assert_eq!(decoded.axis_names, outcome.axis_names, "{}", found.name);
        }
    }

    #[test]
    fn the_cuda_counts_cross_ranks_and_reach_the_report_and_the_summary() {
        // No machine here has a CUDA driver, so the run is on the CPU driver and the counts are
        // set by hand, as a run with CUDA queues would leave them.
        let scenario = scenario("fork-join");
        let mut outcome = outcome_of(&scenario);
        outcome.queues[0].driver = crate::model::DriverKind::Cuda;
        let on_cuda =
            |spec: &crate::model::OpSpec| matches!(spec.target, crate::model::Target::Queue(0));
        let waits: usize = scenario
            .ops
            .iter()
            .zip(&outcome.ops)
            .filter(|(spec, _)| on_cuda(spec))
            .map(|(_, record)| outcome.waits_of(record).len())
            .sum();
        assert!(waits > 0, "fork-join's first queue waits on something");
        let counts = CudaRecord {
            adapter: String::from("CUDA device 0 (Words timelines)"),
            native_waits: 3,
            completed: 1,
            elided: 5,
            held: 2,
        };
        outcome.cuda = Some(counts.clone());
        let decoded = decode(&scenario, &encode(&outcome).expect("encodes")).expect("decodes");
        assert_eq!(decoded.cuda, Some(counts));
        let report: serde_json::Value = serde_json::from_str(&report_of(&decoded)).unwrap();
        let cuda = &report["cuda"];
        assert_eq!(cuda["adapter"], "CUDA device 0 (Words timelines)");
        assert_eq!(
            [&cuda["native_waits"], &cuda["completed"], &cuda["elided"], &cuda["held"]],
            [3, 1, 5, 2]
        );
        assert_eq!(cuda["waits"], waits);
        let summary = crate::summary::summary(&decoded);
        assert!(
            summary.contains("cuda (CUDA device 0 (Words timelines)): 3 stream waits"),
            "{summary}"
        );
        assert!(summary.contains(&format!("per dependency edge would issue {waits}")), "{summary}");
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let (scenario, bytes) = pipeline_records();
        let (scenario, bytes) = (scenario, bytes.clone());
        for cut in 0..bytes.len() {
            assert!(decode(scenario, &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(scenario, &longer).err(), Some(RecordsError::Trailing));
        let mut other = bytes;
        other[0] = VERSION + 1;
        assert_eq!(decode(scenario, &other).err(), Some(RecordsError::Version(VERSION + 1)));
        // Another scenario's records do not fit this one.
        let fork_join = self::scenario("fork-join");
        let theirs = encode(&outcome_of(&fork_join)).unwrap();
        assert!(decode(scenario, &theirs).is_err());
    }

    /// The remote-pipeline scenario and its encoded records, made once.
    fn pipeline_records() -> &'static (Scenario, Vec<u8>) {
        static RECORDS: std::sync::OnceLock<(Scenario, Vec<u8>)> = std::sync::OnceLock::new();
        RECORDS.get_or_init(|| {
            let scenario = scenario("remote-pipeline");
            let bytes = encode(&outcome_of(&scenario)).unwrap();
            (scenario, bytes)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn corrupted_bytes_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)
        ) {
            let (scenario, bytes) = pipeline_records();
            let mut bytes = bytes.clone();
            for (at, byte) in flips {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            // Decoded or refused, never a panic or an out-of-range span.
            if let Ok(decoded) = decode(scenario, &bytes) {
                let _ = report_of(&decoded);
            }
        }
    }
}
