#!/usr/bin/env bash
# The Vulkan tier: the native half of the Vulkan driver (drivers/vulkan) tested on Mesa's
# lavapipe (a CPU Vulkan 1.3 device) with the Khronos validation layer, synchronization
# validation on.
#
# Installs what it needs when missing (mesa-vulkan-drivers, vulkan-validationlayers, libvulkan1,
# glslang-tools through apt-get), then checks that lavapipe's ICD manifest and the validation
# layer's manifest are where the loader looks, and fails with a clear message when something
# cannot be had: nothing is skipped. Then runs the driver's tests on lavapipe, and the example
# that lends wgpu's device to causeway (examples/wgpu_interop.rs) under validation.
#
# Usage: scripts/vulkan.sh [--setup-only]   (--setup-only: install and check, run no test)
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'vulkan: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'vulkan: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

tier_arguments scripts/vulkan.sh "$@"

PACKAGES=(mesa-vulkan-drivers vulkan-validationlayers libvulkan1 glslang-tools)
apt_require "the Vulkan loader, lavapipe, the validation layer and glslang" "${PACKAGES[@]}"

# The loader finds ICDs and explicit layers through these manifests (system-wide locations
# searched by default, XDG_DATA_DIRS aside).
icd=$(find /usr/share/vulkan/icd.d /etc/vulkan/icd.d -name 'lvp_icd*.json' 2>/dev/null | head -n1 || true)
[[ -n $icd ]] || die "lavapipe's ICD manifest (lvp_icd.*.json) is not in /usr/share/vulkan/icd.d; reinstall mesa-vulkan-drivers"
layer=$(find /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d \
  -name 'VkLayer_khronos_validation.json' 2>/dev/null | head -n1 || true)
[[ -n $layer ]] || die "the validation layer's manifest (VkLayer_khronos_validation.json) is not in /usr/share/vulkan/explicit_layer.d; reinstall vulkan-validationlayers"
command -v glslangValidator >/dev/null || die "glslangValidator is not on PATH; reinstall glslang-tools"
note "lavapipe: $icd"
note "validation layer: $layer"

if $setup_only; then
  exit 0
fi

# The tests open lavapipe by name, so a machine with a real GPU tests the same device as CI.
export CAUSEWAY_VULKAN_ADAPTER=${CAUSEWAY_VULKAN_ADAPTER:-llvmpipe}
note "testing on adapter '$CAUSEWAY_VULKAN_ADAPTER'"
cargo test -p causeway-driver-vulkan
# wgpu's device lent to causeway, both working on its queue (drivers/vulkan/examples/
# wgpu_interop.rs), under validation; `cargo test` built it.
interop=$(CAUSEWAY_VULKAN_VALIDATION=1 "${CARGO_TARGET_DIR:-target}/debug/examples/wgpu_interop") ||
  die "the wgpu_interop example failed"
printf '%s\n' "$interop"
grep -q '^wgpu and causeway agree on one VkDevice$' <<<"$interop" ||
  die "the wgpu_interop example did not report agreement"
