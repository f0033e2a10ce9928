#!/usr/bin/env bash
# Instruction counts of the executor's hot paths beside their peers, from callgrind: a figure
# that is the same from run to run, where wall time on a shared machine is not. Runs the
# `hot_path_instructions` example (see its docs) once per mode under callgrind, collecting only
# inside the measured function of each (or between the client requests of the device mode), and
# prints instructions per chain hop (causeway and rayon `scope.spawn`), per activation
# (causeway's release, queue and notify, and the plain fetch_sub, Treiber push and idle-mask
# RMW), per tiled dispatch (causeway's block processor and the plain-counter floor, and their
# difference: the runtime's overhead per dispatch) and per semaphore signal → dependent start on
# a CPU device (from the signalling host function's return to the dependent's entry, bracketed
# by callgrind client requests on the device's one worker, beside the atomic hand-off floor of
# the `signal_to_start` bench).
#
# Installs valgrind through apt-get when it is missing; fails when it cannot be had.
#
# Usage: scripts/instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'instructions: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'instructions: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

apt_require "valgrind (callgrind)" valgrind
command -v valgrind >/dev/null || die "valgrind is not on PATH; reinstall valgrind"

# CAUSEWAY_CARGO_SELECTION: the test command's package selection, so its optimised build is reused.
# shellcheck disable=SC2086 # a list of cargo arguments
cargo build --release ${CAUSEWAY_CARGO_SELECTION:-} --example hot_path_instructions --quiet
target=${CARGO_TARGET_DIR:-target}
binary=$target/release/examples/hot_path_instructions
[[ -x $binary ]] || die "no $binary after the build"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# per_op MODE — instructions per measured operation of MODE (two decimals).
per_op() {
  local mode=$1 log=$work/$1.log out=$work/$1.out collected ops
  valgrind --tool=callgrind --callgrind-out-file="$work/$mode.callgrind" \
    --collect-atstart=no --toggle-collect='*measured_*' "$binary" "$mode" >"$out" 2>"$log" ||
    die "$mode failed under callgrind: $(tail -n 5 "$log")"
  collected=$(sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$log")
  ops=$(sed -n 's/^ops per run: \([0-9]*\)$/\1/p' "$out")
  [[ -n $collected && $collected -gt 0 ]] || die "callgrind collected nothing for $mode"
  [[ -n $ops && $ops -gt 0 ]] || die "$mode did not say how many operations it ran"
  awk -v c="$collected" -v n="$ops" 'BEGIN { printf "%.2f", c / n }'
}

chain_causeway=$(per_op chain-causeway)
chain_rayon=$(per_op chain-rayon)
activation_causeway=$(per_op activation-causeway)
activation_floor=$(per_op activation-floor)
dispatch_causeway=$(per_op dispatch-causeway)
dispatch_floor=$(per_op dispatch-floor)
signal_causeway=$(per_op signal-causeway)
signal_floor=$(per_op signal-floor)

note "chain hop: causeway $chain_causeway instructions, rayon scope.spawn $chain_rayon"
note "activation: causeway $activation_causeway instructions, fetch_sub + Treiber push + idle RMW $activation_floor"
note "tiled dispatch (64 tiles, 2 workers): causeway $dispatch_causeway instructions, floor $dispatch_floor, overhead $(awk -v a="$dispatch_causeway" -v b="$dispatch_floor" 'BEGIN { printf "%.2f", a - b }') per dispatch"
note "signal -> dependent start: causeway $signal_causeway instructions, atomic hand-off (ready store + swap, sequence store + load) $signal_floor"
