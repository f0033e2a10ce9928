#!/usr/bin/env bash
# The facade's examples, built optimised and run, each one's output checked: the programs a
# user copies (docs/src/library.md lists them) must do what they say.
#
# - chunk_pipeline, causal_walkthrough, pipelined_invocations, buffer_reuse,
#   speculative_cancel, static_schedule: CPU queues only;
# - npu_vulkan_chain: the NPU model and a Vulkan queue on lavapipe under the Khronos
#   validation layer (CAUSEWAY_VULKAN_ADAPTER, default llvmpipe; CAUSEWAY_VULKAN_VALIDATION=1);
# - two_ranks: two Open MPI ranks, `mpirun -n 2` under `timeout`.
#
# Each example prints what happened and exits non-zero when its own check fails; this script
# also requires its last line (for two_ranks, each rank's) to be the one that says the check
# passed. Installs lavapipe, the validation layer and Open MPI when missing
# (scripts/mpi.sh --setup-only).
#
# The build takes the package selection of the test command's other builds
# (CAUSEWAY_CARGO_SELECTION, set by scripts/test-all.sh) plus the facade's `mpi` feature, which
# two_ranks requires: with the same selection the dependencies the release tiers built are
# reused, so only the facade and its examples compile. Output: target/examples/NAME.out.
#
# Usage: scripts/examples.sh
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'examples: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'examples: %s\n' "$*"; }

./scripts/mpi.sh --setup-only
export CAUSEWAY_VULKAN_VALIDATION=1
export CAUSEWAY_VULKAN_ADAPTER=${CAUSEWAY_VULKAN_ADAPTER:-llvmpipe}

EXAMPLES=(chunk_pipeline causal_walkthrough pipelined_invocations npu_vulkan_chain buffer_reuse
  speculative_cancel static_schedule two_ranks)
read -r -a selection <<<"${CAUSEWAY_CARGO_SELECTION:---workspace --features causeway-cli/mpi}"
cargo build --release "${selection[@]}" --features causeway/mpi \
  "${EXAMPLES[@]/#/--example=}"

target=${CARGO_TARGET_DIR:-target}
binaries=$target/release/examples
out=target/examples
mkdir -p "$out"

# run_example NAME LAST_LINE — runs example NAME (under a hang guard); its exit status must be
# 0 and its last line of output LAST_LINE.
run_example() {
  local name=$1 last=$2 started=$SECONDS
  note "$name"
  timeout --kill-after=5 120 "$binaries/$name" | tee "$out/$name.out" ||
    die "$name failed (exit ${PIPESTATUS[0]}; output above, also in $out/$name.out)"
  [[ $(tail -n1 "$out/$name.out") == "$last" ]] ||
    die "$name: expected its last line to be '$last'"
  note "$name: checked ($((SECONDS - started)) s)"
}

run_example chunk_pipeline "both match the expected total"
run_example causal_walkthrough "  -> S is at 5, yet the late waiter depends on Q:2 only"
run_example pipelined_invocations "my_timeline@5 signalled by h1@m0:5, carrying {h1@m0:5}"
run_example npu_vulkan_chain "the Vulkan wait on the NPU's value was held by the layer, not issued to Vulkan"
run_example buffer_reuse "one block served two buffers: reuse by death frontier checked"
run_example speculative_cancel "exactly the dependents of rejected drafts were cancelled"
run_example static_schedule "3 streams, 4 waits, makespan = critical path: every dependency honoured"

# Two ranks on this machine: --oversubscribe where it has fewer cores than ranks, --bind-to
# none so each rank's threads (host, workers, MPI progress) are not confined to one core
# (docs/src/mpi.md). Open MPI refuses root without its two variables (containers, CI).
note "two_ranks (mpirun -n 2)"
started=$SECONDS
if ((EUID == 0)); then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
timeout --kill-after=5 120 mpirun --oversubscribe --bind-to none -n 2 "$binaries/two_ranks" |
  tee "$out/two_ranks.out" ||
  die "two_ranks failed under mpirun (exit ${PIPESTATUS[0]}; output above, also in $out/two_ranks.out)"
for rank in 0 1; do
  grep -qx "rank $rank: done" "$out/two_ranks.out" || die "two_ranks: rank $rank did not finish"
done
note "two_ranks: checked ($((SECONDS - started)) s)"

note "${#EXAMPLES[@]} examples ran and were checked"
