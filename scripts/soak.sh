#!/usr/bin/env bash
# Soak: the CPU device's long random workload (drivers/cpu/tests/soak.rs) at 10^6 operations by
# default — eight queues on four workers, random cross-queue waits, 1 % failing host calls,
# 0.1 % panicking kernels — every operation checked against the failure model, no waiter left
# hanging, resident memory flat after warm-up. The test command runs the same test at 10^5.
#
# Usage: scripts/soak.sh [OPERATIONS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'soak: error: %s\n' "$*" >&2; exit 1; }

OPERATIONS=${1:-1000000}
[[ $OPERATIONS =~ ^[0-9]+$ ]] || die "OPERATIONS must be a number, not '$OPERATIONS'"
export CAUSEWAY_SOAK_OPS=$OPERATIONS
if [[ $# -ge 2 ]]; then
  [[ $2 =~ ^[0-9]+$ ]] || die "SEED must be a number, not '$2'"
  export CAUSEWAY_SOAK_SEED=$2
fi
cargo test --release -p causeway-driver-cpu --test soak -- --nocapture ||
  die "the soak failed at $OPERATIONS operations (the output above names the first mismatches)"
