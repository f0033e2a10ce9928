#!/usr/bin/env bash
# The MPI tier: causeway-distributed on real Open MPI ranks over loopback.
#
# Installs what it needs when missing (Debian's Open MPI 4.1: libopenmpi-dev and openmpi-bin;
# libclang-dev for the bindings rsmpi generates at build time) through apt-get, checks that
# mpirun and Open MPI's compiler wrapper are there, and fails with a clear message when
# something cannot be had: nothing is skipped. Then runs the crate's tests; its `ranks` test
# launches `mpirun --oversubscribe -n 2` and `-n 4` itself, every run under `timeout`. Then the
# CLI built with its `mpi` feature runs scenarios under `mpirun -n 2`, `-n 4` and `-n 8`
# (`cli/tests/ranks.rs`, each launch under `timeout`), every bundled multi-rank scenario among
# them on the drivers it names: Vulkan on lavapipe under the validation layer, which
# `scripts/vulkan.sh --setup-only` installs when missing.
#
# Usage: scripts/mpi.sh [--setup-only]   (--setup-only: install and check, run no test)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'mpi: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'mpi: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

tier_arguments scripts/mpi.sh "$@"

PACKAGES=(libopenmpi-dev openmpi-bin libclang-dev)
apt_require "Open MPI and libclang" "${PACKAGES[@]}"

# The bundled multi-rank scenarios run their Vulkan queues on lavapipe.
./scripts/vulkan.sh --setup-only

command -v mpirun >/dev/null || die "mpirun is not on PATH; reinstall openmpi-bin"
command -v mpicc >/dev/null || die "mpicc (rsmpi's build finds Open MPI through it) is not on PATH; reinstall libopenmpi-dev"
version=$(mpirun --version 2>/dev/null | head -n1)
[[ $version == *"Open MPI"* ]] || die "mpirun is not Open MPI's (it says: ${version:-nothing})"
note "$version"

if $setup_only; then
  exit 0
fi

# CI runs as root; Open MPI refuses that unless told it is deliberate.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cargo test -p causeway-distributed
# The CLI across ranks: `mpirun -n N causeway run FILE` (its `mpi` feature, which turns on the
# scenario engine's; the workspace's lint and test steps build the CLI without it). One launch
# at a time: ranks oversubscribe the cores already.
cargo clippy -p causeway-scenario -p causeway-cli --features causeway-cli/mpi --all-targets -- -D warnings
cargo test -p causeway-cli --features mpi --test ranks
