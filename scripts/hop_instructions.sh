#!/usr/bin/env bash
# Instructions of a cross-rank hop's own software — causeway's, not Open MPI's — from callgrind
# on two Open MPI ranks: a figure that is the same from run to run, where wall time is not.
# Runs causeway-distributed's `hop_instructions` example (built with the crate's `hop-probe`
# feature; see its docs for exactly what is inside and outside the count) under
# `mpirun -n 2 valgrind --tool=callgrind --collect-atstart=no`: each rank's worker collects only
# inside the hop's windows, and each side (signalling, receiving, and the send itself) is
# dumped apart. From each side's dumps of both ranks it subtracts the calls from causeway's code
# into Open MPI's libraries (`MPI_Get_count` on the receiving side; `MPI_Send` and rsmpi's
# `MPI_Comm_size` in the send window) and the example's own bracketing functions
# (`hop_instructions::*`), and prints per hop: the signalling side (the signalling operation's
# host function returning up to the reached message's `MPI_Send`, rsmpi's wrapper around it
# included), the receiving side (the receive completed by `MPI_Test` up to the dependent
# operation's host function), their sum, and `MPI_Send`'s own instructions per message beside
# them (inclusive). With --breakdown it also prints, per side, the functions the instructions
# go to (inclusive and self instructions per hop, summed over both ranks' hops).
#
# Installs valgrind and Open MPI through apt-get when they are missing (the packages
# `scripts/mpi.sh` installs, without its Vulkan set-up); fails when they cannot be had.
#
# Usage: scripts/hop_instructions.sh [--breakdown]
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'hop: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'hop: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

breakdown=false
case "${1:-}" in
  "") ;;
  --breakdown) breakdown=true ;;
  *) die "unknown argument $1 (usage: scripts/hop_instructions.sh [--breakdown])" ;;
esac

apt_require "valgrind (callgrind)" valgrind
apt_require "Open MPI and libclang" libopenmpi-dev openmpi-bin libclang-dev
command -v valgrind >/dev/null || die "valgrind is not on PATH; reinstall valgrind"
command -v mpirun >/dev/null || die "mpirun is not on PATH; reinstall openmpi-bin"
command -v mpicc >/dev/null || die "mpicc (rsmpi's build finds Open MPI through it) is not on PATH; reinstall libopenmpi-dev"
version=$(mpirun --version 2>/dev/null | head -n1)
[[ $version == *"Open MPI"* ]] || die "mpirun is not Open MPI's (it says: ${version:-nothing})"

cargo build --release -p causeway-distributed --features hop-probe --example hop_instructions --quiet
target=${CARGO_TARGET_DIR:-target}
binary=$target/release/examples/hop_instructions
[[ -x $binary ]] || die "no $binary after the build"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# CI runs as root; Open MPI refuses that unless told it is deliberate.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Shared memory between the two ranks (vader), as on one machine. --oversubscribe only permits
# two ranks on a one-core machine: nothing counted depends on how the ranks wait.
if ! timeout --kill-after=5 300 mpirun -n 2 --oversubscribe --mca btl vader,self \
  valgrind --tool=callgrind --collect-atstart=no \
  --callgrind-out-file="$work/callgrind.%q{OMPI_COMM_WORLD_RANK}" \
  --log-file="$work/valgrind.%q{OMPI_COMM_WORLD_RANK}" \
  "$binary" >"$work/out" 2>"$work/err"; then
  die "the ranks failed under callgrind: $(tail -n 5 "$work/err") $(tail -n 5 "$work/out")"
fi

# Every measured hop opened and closed its windows, the same number on both ranks.
windows=
for rank in 0 1; do
  line=$(grep "^rank $rank windows: " "$work/out") || die "rank $rank did not report its windows"
  read -r signalling receiving send expected mismatches < <(
    sed -n 's/.*signalling \([0-9]*\) receiving \([0-9]*\) send \([0-9]*\) expected \([0-9]*\) mismatches \([0-9]*\)$/\1 \2 \3 \4 \5/p' <<<"$line"
  )
  [[ -n ${expected:-} && $expected -gt 0 ]] || die "rank $rank's windows line is unreadable: $line"
  [[ $signalling == "$expected" && $receiving == "$expected" && $send == "$expected" &&
    $mismatches == 0 ]] || die "rank $rank's windows are out of step: $line"
  [[ -z $windows || $windows == "$expected" ]] || die "the ranks measured different hop counts"
  windows=$expected
done
# Each rank's windows of a side are its hops in one direction; both ranks', the phase's hops.
hops=$((2 * windows))

# The awk program that sums a side's dumps (one per rank) by function name: collected
# instructions, those in calls from outside Open MPI's libraries into them, the example's own
# (bracketing) functions, the calls into MPI_Send, and per function its inclusive and self
# instructions. Function and object ids are compressed per file.
read -r -d '' SUMMARY <<'AWK' || true
function id_name(spec, table,   id, rest) {
  id = spec; sub(/\).*/, "", id); sub(/^\(/, "", id)
  rest = spec; sub(/^\([0-9]+\) ?/, "", rest)
  if (rest != "") table[id] = rest
  return table[id]
}
FNR == 1 { delete names; delete objects; object = ""; current = ""; in_call = 0 }
/^ob=/ { object = id_name(substr($0, 4), objects); next }
/^cob=/ { id_name(substr($0, 5), objects); next }
/^fn=/ { current = id_name(substr($0, 4), names); object_of[current] = object; in_call = 0; next }
/^cfn=/ { callee = id_name(substr($0, 5), names); next }
/^calls=/ { in_call = 1; next }
/^[0-9+*-]/ {
  cost = (NF >= 2) ? $2 : 0
  if (in_call) {
    in_call = 0
    if (callee != current) { called[current] += cost; edge[current SUBSEP callee] += cost }
  } else {
    self[current] += cost
    total += cost
  }
  next
}
function is_mpi(name) {
  return object_of[name] ~ /(libmpi|libopen-pal|libopen-rte|\/openmpi\/|libpmix|libevent|libhwloc)/
}
END {
  for (pair in edge) {
    split(pair, ends, SUBSEP)
    if (is_mpi(ends[2]) && !is_mpi(ends[1])) {
      mpi += edge[pair]
      if (ends[2] ~ /^P?MPI_Send$/) mpi_send += edge[pair]
    }
  }
  for (name in self) if (name ~ /^hop_instructions::/) probe += self[name]
  printf "totals %d %d %d %d\n", total, mpi, probe, mpi_send
  for (name in self) seen[name] = 1
  for (name in called) seen[name] = 1
  for (name in seen) printf "fn\t%d\t%d\t%s\n", self[name] + called[name], self[name], name
}
AWK

# summary SIDE — the awk summary of SIDE's dumps of both ranks.
summary() {
  local side=$1 dumps
  mapfile -t dumps < <(grep -l "^desc: Trigger: Client Request: $side\$" "$work"/callgrind.*.* || true)
  ((${#dumps[@]} == 2)) || die "expected a $side dump from each rank, found ${#dumps[@]}"
  awk "$SUMMARY" "${dumps[@]}" >"$work/$side.summary"
  read -r _ total _ _ _ < <(grep '^totals ' "$work/$side.summary")
  [[ $total -gt 0 ]] || die "callgrind collected nothing for the $side side"
}

# per_hop SIDE EXPRESSION — EXPRESSION of SIDE's totals (t: collected, m: into MPI,
# p: the example's bracketing, s: into MPI_Send) per hop, one decimal.
per_hop() {
  local side=$1 expression=$2
  awk -v hops="$hops" '/^totals / { t = $2; m = $3; p = $4; s = $5; printf "%.1f", ('"$expression"') / hops }' \
    "$work/$side.summary"
}

for side in signalling receiving send; do
  summary "$side"
done
# The send window's code outside Open MPI (rsmpi's wrapper, the library's loop around the
# send) precedes or brackets MPI_Send on the signalling side's path: counted on that side.
signalling=$(awk -v a="$(per_hop signalling 't - m - p')" -v b="$(per_hop send 't - m - p')" \
  'BEGIN { printf "%.1f", a + b }')
receiving=$(per_hop receiving 't - m - p')
mpi_send=$(per_hop send 's')
total=$(awk -v a="$signalling" -v b="$receiving" 'BEGIN { printf "%.1f", a + b }')

if $breakdown; then
  for side in signalling send receiving; do
    note "$side side, per hop ($hops hops over both ranks): inclusive, self, function"
    # The frames around every window that hold it all and run none of it themselves (the
    # worker thread's start, up to the worker's loop) are left out.
    read -r _ total_side _ _ _ < <(grep '^totals ' "$work/$side.summary")
    awk -F '\t' -v hops="$hops" -v all="$total_side" \
      '$1 == "fn" && ($2 < all || $3 > 0) { printf "%9.1f %9.1f  %s\n", $2 / hops, $3 / hops, $4 }' \
      "$work/$side.summary" | sort -k1,1nr | head -n 20
  done
fi

note "causeway $total non-MPI instructions per cross-rank hop (signalling side $signalling, receiving side $receiving), MPI_Send $mpi_send"
