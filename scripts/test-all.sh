#!/usr/bin/env bash
# Runs every test tier causeway has, in order, on a fresh machine or a warm one.
# Installs what the tiers need when it is missing (the pinned compilers of rust-toolchain.toml and
# scripts/nightly.sh, rustup targets, Miri) and fails loudly when something cannot be had: no
# tier is ever skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."

tiers_passed=0
# Each step's wall time, printed as a table when the script ends (passed or not), so a slow
# tier shows where the time goes.
step_names=()
step_seconds=()
step_name=""
step_started=$SECONDS
end_step() {
  if [[ -n $step_name ]]; then
    step_names+=("$step_name")
    step_seconds+=($((SECONDS - step_started)))
    step_name=""
  fi
}
step() {
  end_step
  step_name=$*
  step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}
print_step_times() {
  end_step
  printf '\nwall time per step (s):\n'
  for i in "${!step_names[@]}"; do
    printf '  %5d  %.90s\n' "${step_seconds[$i]}" "${step_names[$i]}"
  done
  printf '  %5d  in all\n' "$SECONDS"
}
# A lane run in the background (core under Miri and the loom models) does not outlive a failed
# step.
stop_background() {
  if [[ -n ${background_pid:-} ]]; then kill "$background_pid" 2>/dev/null || true; fi
  print_step_times
}
trap stop_background EXIT
passed() { tiers_passed=$((tiers_passed + 1)); }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
note() { printf '%s\n' "$*"; }

CROSS_TARGETS=(thumbv6m-none-eabi thumbv7em-none-eabihf)
# Every host build selects the whole workspace with the CLI's `mpi` feature: cargo resolves
# features per selection, so `-p one-crate` would compile a second copy of the dependencies
# (syn, serde, tokio, proptest...) with other features. With one selection each dependency is
# built once per profile. Scripts that build (browser.sh, capi.sh, instructions.sh) take it from
# CAUSEWAY_CARGO_SELECTION.
WORKSPACE=(--workspace --features causeway-cli/mpi)
export CAUSEWAY_CARGO_SELECTION="${WORKSPACE[*]}"
# A clean build gains nothing from incremental compilation, and pays for it in time and disk.
export CARGO_INCREMENTAL=0

step "set-up: the pinned compilers, rustup targets and Miri"
command -v rustup >/dev/null || die "rustup is required (the cross-target and Miri tiers need it)"
# rust-toolchain.toml names the compiler; rustup installs it on first use, or here by name.
rustc --version >/dev/null 2>&1 || rustup toolchain install ||
  die "could not install the compiler rust-toolchain.toml names"
for target in "${CROSS_TARGETS[@]}"; do
  if ! rustup target list --installed | grep -qx "$target"; then
    rustup target add "$target" || die "could not install rustup target $target"
  fi
done
# shellcheck source=scripts/nightly.sh
source scripts/nightly.sh
install_nightly miri rust-src

step "set-up: the Vulkan loader, lavapipe, the validation layer and glslang"
./scripts/vulkan.sh --setup-only
# Every Vulkan device opened from here on (driver tests, scenarios through the CLI) runs under
# the Khronos validation layer; any message it reports fails the test or the scenario.
export CAUSEWAY_VULKAN_VALIDATION=1
export CAUSEWAY_VULKAN_ADAPTER=${CAUSEWAY_VULKAN_ADAPTER:-llvmpipe}

step "set-up: Open MPI and libclang (rsmpi's bindings need both to build)"
./scripts/mpi.sh --setup-only

step "set-up: LLVM's llc (checks the CUDA driver's PTX against its source)"
./scripts/cuda.sh --setup-only

step "set-up: mdbook (the guide) and python3 (its link checker)"
./scripts/book.sh --setup-only

step "style: rustfmt, clippy and rustdoc (warnings are errors)"
cargo fmt --all -- --check || die "cargo fmt reports unformatted code"
cargo clippy "${WORKSPACE[@]}" --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc "${WORKSPACE[@]}" --no-deps
# The private items too: their docs (module write-ups, invariants, protocols) are the
# developers' reference, and a broken link there is as wrong as one in the public API.
RUSTDOCFLAGS="-D warnings" cargo doc "${WORKSPACE[@]}" --no-deps --document-private-items
passed

step "the guide: the mdBook in docs/ built (warnings fail), every link of the book and the README checked"
# About a second. The chapters' Rust snippets run with the facade's doctests in tiers 1 and 3.
./scripts/book.sh
passed

step "public API: every published crate's API against its baseline in api/ (rustdoc JSON of the pinned nightly)"
# Deliberate API changes land with their baselines: CAUSEWAY_BLESS=1 scripts/public_api.sh
# rewrites them. Its own target folder (target/public-api): nightly rustdoc JSON and the lister.
./scripts/public_api.sh
passed

step "tiers 1 and 3: every crate's unit, property and integration tests (Vulkan on lavapipe under validation, wgpu beside causeway on one VkDevice, the CUDA driver's bookkeeping, real MPI ranks under mpirun -n 2, 4 and 8)"
# One command for every crate: the Vulkan driver on lavapipe with validation and
# synchronization validation on, the CUDA driver's bookkeeping (its GPU tests where libcuda.so
# is installed), causeway-distributed and the CLI on Open MPI ranks (every mpirun under
# timeout; scripts/vulkan.sh, cuda.sh and mpi.sh run the same tests one tier at a time).
cargo test "${WORKSPACE[@]}" --no-fail-fast
# wgpu's Vulkan device, opened through wgpu-hal and lent to causeway, with wgpu's compute passes
# and a causeway CPU -> Vulkan -> CPU chain on its one queue, on lavapipe under validation
# (drivers/vulkan/examples/wgpu_interop.rs; any validation message fails it). `cargo test` just
# built it; it runs in well under a second.
./target/debug/examples/wgpu_interop | tee target/wgpu-interop.out
grep -q '^wgpu and causeway agree on one VkDevice$' target/wgpu-interop.out ||
  die "the wgpu_interop example did not report agreement"
passed

step "CUDA: the GPU tests' outcome, printed (run where libcuda.so is installed, skipped with a reason elsewhere)"
# The GPU tests and the CUDA driver's conformance suite print `skipped: <reason>` where no CUDA
# driver is installed; the summary repeats the reason, so the skip is never silent. Excluding
# the Vulkan driver keeps lavapipe out of this step; the other drivers' `backend` and
# `conformance` tests rerun beside the CUDA driver's (seconds), and the build is the one tiers 1
# and 3 made.
cargo test "${WORKSPACE[@]}" --exclude causeway-driver-vulkan --test backend --test conformance \
  -- --nocapture 2>&1 | tee target/cuda-tests.log
cuda_skipped=$(grep -m1 '^skipped: ' target/cuda-tests.log | sed 's/^skipped: //' || true)
passed

step "causeway as a dependency: a fresh crate outside the repository runs the README's example (default features) and a CPU → Vulkan program (feature vulkan) on lavapipe"
# The lockfile's dependencies are in cargo's cache by now; its own target folder
# (target/dependent), since the facade's features there are a user's, not the workspace's.
./scripts/dependent.sh
passed

step "packaging: published crates' metadata; every crate packaged and built from its package (default and all features); each checked with its rust-version's compiler"
# After the tiers above, which fetched nearly every dependency (it builds offline, after one
# `cargo fetch`). Target folders of its own: target/packages, and target/msrv for the
# rust-version checks.
./scripts/packages.sh
passed

step "tier 2: executor stress, zero-allocation tests and the 10^5-operation soak, optimised"
cargo test --release "${WORKSPACE[@]}" --test executor_stress --test no_alloc --test device_no_alloc \
  --test no_alloc_stream --test block_no_alloc --test soak
passed

step "no heap in core: no alloc crate, builds for Cortex-M0 (no CAS) and Cortex-M4"
# `std` appears only under cfg(test); `alloc` must not appear at all.
if grep -rnwE 'extern crate alloc|alloc::[a-z_]+' core/src --include=*.rs; then
  die "causeway-core must not use the alloc crate"
fi
for target in "${CROSS_TARGETS[@]}"; do
  cargo build -p causeway-core --release --target "$target"
  cargo build -p causeway-core --release --target "$target" --features isr-safe
  # The NPU ring protocol without its hosted model: what the controller firmware links.
  cargo build -p causeway-driver-npu --release --target "$target" --no-default-features
done
passed

step "tier 2: Miri over core, the device layer, the runtime and distributed's wire codec, and the loom models, side by side"
# Miri interprets one test at a time and loom explores one model at a time, so on two cores they
# run in two lanes of about equal length: everything is built first (both cores), then core
# under Miri and every loom model set run in the background while the device layer, the
# runtime and distributed's codec run under Miri here. Cargo holds a target directory's lock
# while its tests run, so the background lane has directories of its own (core's Miri build is
# small). The background lane's output is printed when it ends; its status fails this step like
# any other.
loom_test() {
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release "$@"
}
core_miri() {
  CARGO_TARGET_DIR=target/miri-core cargo "+$NIGHTLY" miri test -p causeway-core --lib "$@"
}
loom_sets=(
  "-p causeway-runtime --test loom_stream --test loom_compute_sleep --test loom_coroutine"
  "-p causeway-core --features signal-cancellation --test loom_semaphore --test loom_arena --test loom_executor"
  "-p causeway-driver-cpu --test loom_block"
  "-p causeway-driver-npu --no-default-features --test loom_ring"
  "-p causeway-device --test loom_run_claim --test loom_wait_count --test loom_ownership --test loom_head_waiters"
)
# The device layer under Miri: its unit tests, and whole devices built, run, failed by a broken
# driver and shut down (the ring's unsafe hand-overs, the leaked state freed at shutdown).
# Permissive provenance: rustix's futex call casts an integer argument to a pointer.
device_miri=(-p causeway-device --lib --test broken_driver)
# The runtime under Miri: the pool, the stream ring, coroutines and waits (counts cut under
# cfg(miri)); distributed's code that runs without MPI (the wire codec; its proptest needs the
# working directory, hence no isolation).
runtime_miri=(-p causeway-runtime --lib --test streams --test coroutines)
distributed_miri=(-p causeway-distributed --lib)
core_miri --no-run
MIRIFLAGS=-Zmiri-permissive-provenance cargo "+$NIGHTLY" miri test "${device_miri[@]}" --no-run
MIRIFLAGS=-Zmiri-permissive-provenance cargo "+$NIGHTLY" miri test "${runtime_miri[@]}" --no-run
MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-disable-isolation" \
  cargo "+$NIGHTLY" miri test "${distributed_miri[@]}" --no-run
for set in "${loom_sets[@]}"; do
  # shellcheck disable=SC2086 # $set is a list of cargo arguments
  loom_test $set --no-run
done
mkdir -p target/tier-logs
background_lane() {
  core_miri
  for set in "${loom_sets[@]}"; do
    # shellcheck disable=SC2086
    loom_test $set
  done
}
background_lane >target/tier-logs/miri-core-and-loom.log 2>&1 &
background_pid=$!
background_started=$SECONDS
MIRIFLAGS=-Zmiri-permissive-provenance cargo "+$NIGHTLY" miri test "${device_miri[@]}"
MIRIFLAGS=-Zmiri-permissive-provenance cargo "+$NIGHTLY" miri test "${runtime_miri[@]}"
MIRIFLAGS="-Zmiri-permissive-provenance -Zmiri-disable-isolation" PROPTEST_CASES=16 \
  cargo "+$NIGHTLY" miri test "${distributed_miri[@]}"
passed
foreground_ended=$SECONDS
background_status=0
wait "$background_pid" || background_status=$?
background_pid=""
printf '\n--- core under Miri, then the loom models (background: %ds; this lane ended after %ds) ---\n' \
  "$((SECONDS - background_started))" "$((foreground_ended - background_started))"
cat target/tier-logs/miri-core-and-loom.log
((background_status == 0)) ||
  die "core under Miri or a loom model set failed (exit $background_status; log above, also in target/tier-logs/miri-core-and-loom.log)"
passed

step "fuzzing: every cargo-fuzz target for 20s on its seed corpus"
./scripts/fuzz.sh 20
passed

step "tier 5: benchmarks build and run one iteration each"
# Bench targets only (`--bench '*'`): the libraries' unit tests ran in tiers 1 and 3, and
# selecting them here would build every package's test dependencies optimised too.
cargo bench "${WORKSPACE[@]}" --bench '*' -- --test
passed

step "hot paths in instructions: callgrind over hot_path_instructions, and a cross-rank hop on two ranks, every run checked"
./scripts/instructions.sh
./scripts/hop_instructions.sh
passed

step "tier 4: firmware images on qemu (mps2-an386, microbit, riscv32 virt); the C API from C (sanitizers, C++, a C image on mps2-an386); Windows tests under wine"
./scripts/firmware.sh
# After firmware.sh: it prints the C image's sizes beside the Rust controller that one built.
./scripts/capi.sh
./scripts/windows.sh
passed

step "browser: the HTML view of every bundled scenario in headless Chromium (chromedriver)"
./scripts/browser.sh
passed

step "examples: every program in examples/ built optimised and run, its output checked (CPU pipeline, NPU → Vulkan on lavapipe, buffer reuse, speculation, a static schedule, two MPI ranks)"
# Seconds: the release tiers above built the dependencies with the same selection.
./scripts/examples.sh
passed

step "main job: every bundled scenario through the causeway CLI, expectations checked"
cargo build --release -p causeway-cli --bin causeway
for scenario in scenarios/*.toml; do
  ./target/release/causeway run "$scenario" --quiet --report target/scenario-report.json \
    --trace target/scenario-trace.json || die "scenario $scenario failed"
done
passed

printf '\ntiers: %d passed, 0 failed\n' "$tiers_passed"
if [ -n "${cuda_skipped:-}" ]; then
  printf 'CUDA tier: GPU tests and the conformance suite skipped: %s (the bookkeeping tests ran)\n' \
    "$cuda_skipped"
fi
