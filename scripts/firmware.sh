#!/usr/bin/env bash
# Tier 4, bare metal: builds the test images in tests/firmware for three targets, runs each on
# its qemu machine (pass/fail by the semihosting exit status, every run under a timeout), lints
# the firmware workspace, checks the 4-queue controller and the NPU controller against their size
# budgets, and prints the NPU controller's instructions per descriptor, measured under qemu's
# -icount (deterministic: the same figures on every run).
#
# Installs what it needs when missing (rustup targets and llvm-tools; qemu-system-arm and
# qemu-system-misc through apt-get) and fails with a clear message when something cannot be
# had: nothing is skipped. Idempotent; on a warm machine it rebuilds nothing.
#
# Environment: QEMU_TIMEOUT (seconds per qemu run, default 120).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'firmware: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'firmware: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

ROOT=$PWD
FIRMWARE=tests/firmware
# Beside the rest of the build: under the caller's CARGO_TARGET_DIR when one is set (made
# absolute, since the builds below run from the firmware's directory).
target_root=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $target_root == /* ]] || target_root=$ROOT/$target_root
export CARGO_TARGET_DIR="$target_root/firmware"
QEMU_TIMEOUT=${QEMU_TIMEOUT:-120}
LOGS="$CARGO_TARGET_DIR/logs"

# target, qemu binary, machine arguments, board name (for logs)
BOARDS=(
  "thumbv7em-none-eabihf|qemu-system-arm|-machine mps2-an386|mps2-an386"
  "thumbv6m-none-eabi|qemu-system-arm|-machine microbit|microbit"
  "riscv32imac-unknown-none-elf|qemu-system-riscv32|-machine virt -bios none|riscv32-virt"
)
# The size budgets, on the Cortex-M0 at opt-level "s": image, flash bytes, static RAM bytes.
BUDGET_TARGET=thumbv6m-none-eabi
BUDGETS=(
  "controller|16384|4096"
  "npu_controller|24576|6144"
)
# npu_cost's clock arithmetic assumes this shift (npu::cost::ICOUNT_SHIFT); sleep=off makes idle
# time jump to the next timer deadline instead of following the host's clock.
ICOUNT="-icount shift=6,sleep=off"

# --- set-up ------------------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup is required to install the bare-metal targets"
installed_targets=$(rustup target list --installed)
for board in "${BOARDS[@]}"; do
  target=${board%%|*}
  if ! grep -qx "$target" <<<"$installed_targets"; then
    note "installing rustup target $target"
    rustup target add "$target" || die "could not install rustup target $target"
  fi
done
if ! rustup component list --installed | grep -q '^llvm-tools'; then
  note "installing rustup component llvm-tools (llvm-size, llvm-nm)"
  rustup component add llvm-tools || die "could not install the llvm-tools component"
fi
LLVM_BIN="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
[[ -x $LLVM_BIN/llvm-size && -x $LLVM_BIN/llvm-nm ]] ||
  die "llvm-size/llvm-nm not found in $LLVM_BIN although llvm-tools is installed"

missing_packages=()
command -v qemu-system-arm >/dev/null || missing_packages+=(qemu-system-arm)
command -v qemu-system-riscv32 >/dev/null || missing_packages+=(qemu-system-misc)
apt_install "qemu for Arm and RISC-V" "${missing_packages[@]}"
for qemu in qemu-system-arm qemu-system-riscv32; do
  command -v "$qemu" >/dev/null || die "$qemu is still missing after installation"
done
command -v timeout >/dev/null || die "coreutils' timeout is required to bound the qemu runs"

# --- build and lint ----------------------------------------------------------------------------
(cd "$FIRMWARE" && cargo fmt -- --check) || die "tests/firmware is not rustfmt-formatted"
for board in "${BOARDS[@]}"; do
  target=${board%%|*}
  (cd "$FIRMWARE" && cargo build --release --target "$target") ||
    die "the firmware images do not build for $target"
  (cd "$FIRMWARE" && cargo clippy --release --target "$target" --all-targets -- -D warnings) ||
    die "clippy reports warnings in the firmware for $target"
done

# --- run ---------------------------------------------------------------------------------------
mkdir -p "$LOGS"
failures=()
for board in "${BOARDS[@]}"; do
  IFS='|' read -r target qemu machine name <<<"$board"
  for image in selftest controller npu_controller npu_waits npu_cost; do
    elf="$CARGO_TARGET_DIR/$target/release/$image"
    log="$LOGS/$name-$image.log"
    clock=""
    [[ $image == npu_cost ]] && clock=$ICOUNT
    note "running $image on $qemu $machine${clock:+ $clock} (timeout ${QEMU_TIMEOUT}s)"
    started=$SECONDS
    set +e
    # shellcheck disable=SC2086 # $machine and $clock are lists of arguments
    timeout --kill-after=10 "$QEMU_TIMEOUT" "$qemu" $machine $clock -nographic -monitor none \
      -serial none -semihosting-config enable=on,target=native -kernel "$elf" </dev/null >"$log" 2>&1
    status=$?
    set -e
    if [[ $image == selftest || $image == npu_waits || $image == npu_cost ]]; then
      sed 's/^/    /' "$log"
    fi
    case $status in
      0) note "$image on $name passed in $((SECONDS - started))s" ;;
      124 | 137)
        failures+=("$image on $name hung: no exit within ${QEMU_TIMEOUT}s (log: $log)")
        tail -n 20 "$log" | sed 's/^/    /' ;;
      *)
        failures+=("$image on $name failed with exit status $status (log: $log)")
        tail -n 20 "$log" | sed 's/^/    /' ;;
    esac
  done
done
if ((${#failures[@]})); then
  printf 'firmware: FAILED: %s\n' "${failures[@]}" >&2
  exit 1
fi

# --- size budget -------------------------------------------------------------------------------
# Flash: what the image stores (vector table, code, read-only data, the initial values of
# .data); RAM: what it occupies statically (.data, .bss, .uninit), stack excluded.
size_of() { # elf -> "flash ram"
  "$LLVM_BIN/llvm-size" -A "$1" | awk '
    $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" || $1 == ".gnu.sgstubs" ||
      $1 == ".init" || $1 == ".trap" { flash += $2 }
    $1 == ".data" { flash += $2; ram += $2 }
    $1 == ".bss" || $1 == ".uninit" || $1 == ".heap" { ram += $2 }
    END { print flash + 0, ram + 0 }'
}
budget() { # image flash-budget ram-budget
  local image=$1 budget_flash=$2 budget_ram=$3 target flash ram elf
  printf '\nfirmware: %s image sizes (opt-level "s"; stack excluded)\n' "$image"
  printf '  %-30s %12s %12s\n' target flash "static RAM"
  for board in "${BOARDS[@]}"; do
    target=${board%%|*}
    read -r flash ram < <(size_of "$CARGO_TARGET_DIR/$target/release/$image")
    printf '  %-30s %7d B    %7d B\n' "$target" "$flash" "$ram"
  done
  elf="$CARGO_TARGET_DIR/$BUDGET_TARGET/release/$image"
  read -r flash ram < <(size_of "$elf")
  printf '\nfirmware: %s %s code by origin (bytes; core code inlined into the image counts as glue)\n' \
    "$image" "$BUDGET_TARGET"
  "$LLVM_BIN/llvm-nm" -C --radix=d --size-sort -S "$elf" | awk '
    $3 ~ /^[tT]$/ {
      size = $2 + 0; name = $0; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, "", name)
      if (name ~ /causeway_firmware_tests/ && name !~ /^<causeway_(core|driver_npu)/) group = "image glue (core and protocol inlined)"
      else if (match(name, /causeway_core::[a-z_]+/)) group = substr(name, RSTART, RLENGTH)
      else if (match(name, /causeway_driver_npu::[a-z_]+/)) group = substr(name, RSTART, RLENGTH)
      else if (name ~ /^__aeabi|compiler_builtins/) group = "compiler_builtins (memcpy, 64-bit shifts)"
      else if (name ~ /^spin::/) group = "spin (Once, Mutex)"
      else group = "runtime, board, panic, semihosting"
      total[group] += size
    }
    END { for (g in total) printf "    %6d  %s\n", total[g], g }' | sort -rn
  printf '  largest statics:\n'
  "$LLVM_BIN/llvm-nm" -C --radix=d --size-sort -S "$elf" | awk '$3 ~ /^[bBdD]$/' | tail -n 6 |
    awk '{ size = $2 + 0; name = $0; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, "", name); printf "    %6d  %s\n", size, name }'
  printf 'firmware: %s budget on %s: flash %d / %d B, static RAM %d / %d B\n' \
    "$image" "$BUDGET_TARGET" "$flash" "$budget_flash" "$ram" "$budget_ram"
  ((flash <= budget_flash)) || die "the $image image's flash ($flash B) exceeds its budget ($budget_flash B)"
  ((ram <= budget_ram)) || die "the $image image's static RAM ($ram B) exceeds its budget ($budget_ram B)"
}
for entry in "${BUDGETS[@]}"; do
  IFS='|' read -r image budget_flash budget_ram <<<"$entry"
  budget "$image" "$budget_flash" "$budget_ram"
done
note "all images passed on all three machines; both controllers are within their size budgets"
