#!/usr/bin/env bash
# Fuzzing: lints fuzz/ (its own workspace), builds every cargo-fuzz target there (libFuzzer,
# address sanitizer, debug assertions) and runs each for SECONDS (default 60) on a fresh copy
# of its committed seed corpus (fuzz/corpus/<target>/), so that what libFuzzer adds to its
# corpus while running never lands among the seeds. Targets are discovered with `cargo fuzz
# list`: a new one cannot be forgotten. Every input runs under a time and a memory limit, so
# hangs and runaway allocations count as findings like panics do. Prints each target's
# executions and fails if any target found something; reproducers land in
# fuzz/artifacts/<target>/.
#
# Installs what it needs when missing (the pinned nightly of scripts/nightly.sh through rustup,
# cargo-fuzz through cargo install --locked) and fails with a clear message when something
# cannot be had.
#
# Usage: scripts/fuzz.sh [SECONDS]
# Environment: FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_RSS_MB (memory limit
# in MiB, default 2048), FUZZ_JOBS (targets fuzzed at once, default the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'fuzz: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'fuzz: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

SECONDS_PER_TARGET=${1:-60}
[[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]] || die "SECONDS must be a positive integer, not '$SECONDS_PER_TARGET'"
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_RSS_MB=${FUZZ_RSS_MB:-2048}
FUZZ_DIR=fuzz
WORK_CORPUS=$FUZZ_DIR/target/fuzz-corpus
LOGS=$FUZZ_DIR/target/fuzz-logs

# --- set-up ------------------------------------------------------------------------------------
# libFuzzer's sanitizer flags are nightly-only: the pinned nightly builds and runs the targets.
# shellcheck source=scripts/nightly.sh
source scripts/nightly.sh
install_nightly
if ! cargo fuzz --version >/dev/null 2>&1; then
  note "installing cargo-fuzz"
  cargo install cargo-fuzz --locked || die "could not install cargo-fuzz"
fi
cargo fuzz --version >/dev/null 2>&1 || die "cargo-fuzz is still missing after installation"

# --- lint and build ----------------------------------------------------------------------------
cd "$FUZZ_DIR"
# The root style checks cover the root workspace only; this one is linted here.
cargo fmt -- --check || die "$FUZZ_DIR is not rustfmt-formatted"
cargo clippy --all-targets -- -D warnings || die "clippy reports warnings in $FUZZ_DIR"
mapfile -t targets < <(cargo "+$NIGHTLY" fuzz list)
((${#targets[@]})) || die "cargo fuzz list found no targets in $FUZZ_DIR"
note "building ${targets[*]}"
cargo "+$NIGHTLY" fuzz build || die "the fuzz targets do not build"
cd ..

# --- run ---------------------------------------------------------------------------------------
# libFuzzer runs one thread per process, so targets run FUZZ_JOBS at a time (default: the
# number of cores): every target still gets its full SECONDS, in less wall time.
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
[[ $FUZZ_JOBS =~ ^[1-9][0-9]*$ ]] || die "FUZZ_JOBS must be a positive integer, not '$FUZZ_JOBS'"
mkdir -p "$LOGS"

# Replays `target`'s past findings, then fuzzes it; writes its summary line to
# $LOGS/<target>.summary and, for a finding, "failed" to $LOGS/<target>.failed.
fuzz_one() {
  local target=$1 corpus=$WORK_CORPUS/$1 log=$LOGS/$1.log status=0 executions per_second
  rm -f "$LOGS/$target.summary" "$LOGS/$target.failed"
  rm -rf "$corpus"
  mkdir -p "$corpus"
  if [[ -d $FUZZ_DIR/corpus/$target ]]; then
    cp -R "$FUZZ_DIR/corpus/$target/." "$corpus/"
  else
    note "$target has no seed corpus in $FUZZ_DIR/corpus/$target; starting from nothing"
  fi
  # Every past finding is replayed first: a fixed one must stay fixed.
  if [[ -d $FUZZ_DIR/regressions/$target ]]; then
    note "replaying $target's regressions"
    (cd "$FUZZ_DIR" && cargo "+$NIGHTLY" fuzz run "$target" regressions/"$target"/* -- \
      -timeout="$FUZZ_TIMEOUT" -rss_limit_mb="$FUZZ_RSS_MB") >"$LOGS/$target-regressions.log" 2>&1 || {
      echo "$target (regressions)" >>"$LOGS/$target.failed"
      grep -E 'panicked at|ERROR: libFuzzer|SUMMARY' "$LOGS/$target-regressions.log" | sed 's/^/    /' >&2 || true
    }
  fi
  note "running $target for ${SECONDS_PER_TARGET}s (log: $log)"
  (cd "$FUZZ_DIR" && cargo "+$NIGHTLY" fuzz run "$target" "target/fuzz-corpus/$target" -- \
    -max_total_time="$SECONDS_PER_TARGET" -timeout="$FUZZ_TIMEOUT" \
    -rss_limit_mb="$FUZZ_RSS_MB" -print_final_stats=1) >"$log" 2>&1 || status=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if ((status != 0)); then
    echo "$target" >>"$LOGS/$target.failed"
    printf '%-24s FAILED (exit %d) after %s executions\n' "$target" "$status" "${executions:-?}" \
      >"$LOGS/$target.summary"
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written to' "$log" | sed 's/^/    /' >&2 || true
  elif [[ -z $executions ]]; then
    echo "$target" >>"$LOGS/$target.failed"
    printf '%-24s no final stats from libFuzzer (see %s)\n' "$target" "$log" >"$LOGS/$target.summary"
  else
    printf '%-24s %12s executions  %8s exec/s\n' "$target" "$executions" "$per_second" \
      >"$LOGS/$target.summary"
  fi
}

at_most "$FUZZ_JOBS" fuzz_one "${targets[@]}"
failed=()
summary=()
for target in "${targets[@]}"; do
  [[ -f $LOGS/$target.summary ]] || die "$target left no summary (see $LOGS/$target.log)"
  summary+=("$(cat "$LOGS/$target.summary")")
  if [[ -f $LOGS/$target.failed ]]; then
    mapfile -t -O "${#failed[@]}" failed <"$LOGS/$target.failed"
  fi
done

printf '\nfuzz: %d targets, %ss each\n' "${#targets[@]}" "$SECONDS_PER_TARGET"
printf '  %s\n' "${summary[@]}"
((${#failed[@]} == 0)) || die "findings in ${failed[*]}: reproducers in $FUZZ_DIR/artifacts/<target>/, logs in $LOGS/"
