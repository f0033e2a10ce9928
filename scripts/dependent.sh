#!/usr/bin/env bash
# causeway as a dependency: a fresh crate outside the repository that depends on it by path, as
# a runtime team's crate would, built with the pinned compiler and this checkout's lockfile.
#
# 1. Default features: its main.rs is the README's library example, cut from README.md between
#    the `dependent-example` markers (so this tests exactly what the README shows); built, run,
#    and its output checked.
# 2. `features = ["vulkan"]`: its main.rs is examples/cross_driver.rs (a CPU queue's semaphore
#    waited on from a Vulkan queue), run on lavapipe under the Khronos validation layer.
#
# Installs and checks lavapipe and the validation layer through scripts/vulkan.sh. Builds into
# target/dependent, so a warm run rebuilds only the two small crates.
#
# Usage: scripts/dependent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

die() { printf 'dependent: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'dependent: %s\n' "$*"; }

./scripts/vulkan.sh --setup-only
export CAUSEWAY_VULKAN_VALIDATION=1
export CAUSEWAY_VULKAN_ADAPTER=${CAUSEWAY_VULKAN_ADAPTER:-llvmpipe}
export CARGO_TARGET_DIR=$repo/target/dependent

crate=$(mktemp -d)
trap 'rm -rf "$crate"' EXIT
mkdir "$crate/src"
# The lockfile pins every dependency to the versions the workspace tests, all already in
# cargo's cache: the build needs no network (`--offline`). The toolchain file keeps the
# compiler the workspace's.
cp Cargo.lock rust-toolchain.toml "$crate/"

# manifest FEATURES — the crate's Cargo.toml, depending on causeway with FEATURES (a TOML
# array). Its own `[workspace]` keeps cargo from looking for one above the temporary folder.
manifest() {
  cat >"$crate/Cargo.toml" <<EOF
[package]
name = "causeway-dependent"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
causeway = { path = "$repo", features = $1 }

[workspace]
EOF
}

# run_crate EXPECTED — builds and runs the crate; its last line of output must be EXPECTED.
run_crate() {
  local output
  output=$(cd "$crate" && cargo run --offline --quiet) || die "the crate did not build or run (above)"
  printf '%s\n' "$output"
  [[ $(tail -n1 <<<"$output") == "$1" ]] || die "expected the output to end with '$1'"
}

note "default features: the README's library example"
# The lines between the markers but the code fences; rustdoc's hidden lines (`# ...`), should
# the example ever have some, are code too.
awk '/^<!-- dependent-example: end/ { inside = 0 }
     inside && !/^```/ { print }
     /^<!-- dependent-example: begin/ { inside = 1 }' README.md |
  sed -E 's/^# //; s/^#$//' >"$crate/src/main.rs"
grep -q 'fn main' "$crate/src/main.rs" || die "no README example between the dependent-example markers"
manifest '[]'
# The dependency tree of the default build: no driver beyond the CPU's.
if (cd "$crate" && cargo tree --offline -e normal --prefix none) |
  grep -E '^(ash|cudarc|mpi|causeway-driver-(vulkan|npu|cuda)|causeway-distributed) '; then
  die "the default features pull in a driver other than the CPU's (above)"
fi
run_crate "c = a + b: 1024 sums of 3, frontier of 2 queues"

note "feature vulkan: examples/cross_driver.rs on $CAUSEWAY_VULKAN_ADAPTER, validation on"
cp examples/cross_driver.rs "$crate/src/main.rs"
manifest '["vulkan"]'
run_crate "c = a + b on Vulkan after a CPU upload: frontier of 2 queues"
note "passed"
