#!/usr/bin/env bash
# The CUDA tier: the CUDA driver's bookkeeping tests everywhere, its GPU tests where a CUDA
# driver (libcuda.so) is installed.
#
# Installs what it needs when missing: LLVM's `llc` (Debian's `llvm`), whose NVPTX backend
# regenerates the driver's compute kernels from their source (`drivers/cuda/kernels/*.ll`) so
# the `kernels` test can check the shipped PTX is exactly that — no CUDA toolkit is needed.
# Fails with a clear message when it cannot be had: nothing is skipped. The GPU tests print
# `skipped: <reason>` where no CUDA driver is installed; the log keeps it for the summary.
#
# Usage: scripts/cuda.sh [--setup-only]   (--setup-only: install and check, run no test)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'cuda: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'cuda: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

tier_arguments scripts/cuda.sh "$@"

apt_require "LLVM's llc (its NVPTX backend checks the CUDA driver's PTX)" llvm
command -v llc >/dev/null || die "llc is not on PATH; reinstall llvm"
llc --version | grep -q nvptx64 || die "this llc has no NVPTX backend (llc --version lists its targets)"
note "$(llc --version | grep -m1 -i 'llvm version' | sed 's/^ *//')"

if $setup_only; then
  exit 0
fi

mkdir -p target
cargo test -p causeway-driver-cuda -- --nocapture 2>&1 | tee target/cuda-tests.log
