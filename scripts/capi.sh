#!/usr/bin/env bash
# The C API tier (capi/): the checked-in header is current; a hosted C program exercises the
# core objects and a device through their success, failure and bad-input paths under
# AddressSanitizer and UndefinedBehaviorSanitizer (any report fails it); a C++ translation unit
# includes the header and links; the bare-metal static library builds and lints for Cortex-M4
# and RV32 with panic = "abort"; and a C firmware image (arm-none-eabi-gcc, picolibc with
# semihosting) linking it runs on qemu's mps2-an386, the machine of the Rust images, its flash
# and RAM printed beside the Rust controller's when scripts/firmware.sh has built it.
#
# Sanitizers: the C code is instrumented (-fsanitize=address,undefined, no recovery), the Rust
# static library is linked as built for release, uninstrumented; LeakSanitizer is on.
#
# Installs what it needs when missing (rustup targets; gcc-arm-none-eabi, picolibc and qemu
# through apt-get) and fails with a clear message when something cannot be had: nothing is
# skipped. Prints its wall time.
#
# Environment: QEMU_TIMEOUT (seconds for the qemu run, default 60); CAUSEWAY_CARGO_SELECTION
# (the packages and features cargo builds the header test with; default -p causeway-capi; the
# test command passes its own, so its build is reused).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'capi: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'capi: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

started=$SECONDS
ROOT=$PWD
target_root=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $target_root == /* ]] || target_root=$ROOT/$target_root
OUT=$target_root/firmware/capi
QEMU_TIMEOUT=${QEMU_TIMEOUT:-60}
BARE_METAL=(thumbv7em-none-eabihf riscv32imac-unknown-none-elf)
# The bare-metal library's profile (the root Cargo.toml): opt-level "s", LTO, panic = "abort".
PROFILE=capi-firmware

# --- set-up ------------------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup is required to install the bare-metal targets"
installed_targets=$(rustup target list --installed)
for target in "${BARE_METAL[@]}"; do
  if ! grep -qx "$target" <<<"$installed_targets"; then
    note "installing rustup target $target"
    rustup target add "$target" || die "could not install rustup target $target"
  fi
done
apt_require "gcc, g++, the Arm bare-metal toolchain, picolibc and qemu" \
  gcc g++ gcc-arm-none-eabi picolibc-arm-none-eabi qemu-system-arm
for tool in gcc g++ arm-none-eabi-gcc arm-none-eabi-nm qemu-system-arm timeout; do
  command -v "$tool" >/dev/null || die "$tool is still missing after installation"
done
mkdir -p "$OUT"

# --- the header --------------------------------------------------------------------------------
note "checking that capi/include/causeway.h is what cbindgen generates"
selection=${CAUSEWAY_CARGO_SELECTION:--p causeway-capi}
# shellcheck disable=SC2086 # $selection is a list of cargo arguments
cargo test -q $selection --test header || die "capi/include/causeway.h is out of date (see above)"

# --- hosted: C under the sanitizers, C++ -------------------------------------------------------
cargo build -q --release -p causeway-capi || die "the hosted static library does not build"
HOSTED_LIB=$target_root/release/libcauseway_capi.a
# What the Rust standard library needs from the system (rustc --print native-static-libs).
SYSTEM_LIBS=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
gcc -std=c11 -Wall -Wextra -Werror -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
  -fno-omit-frame-pointer -Icapi/include capi/tests/c/hosted.c "$HOSTED_LIB" "${SYSTEM_LIBS[@]}" \
  -o "$OUT/hosted" || die "capi/tests/c/hosted.c does not build warning-free"
note "running the hosted C test under AddressSanitizer and UndefinedBehaviorSanitizer"
log=$OUT/hosted.log
status=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  timeout --kill-after=10 120 "$OUT/hosted" >"$log" 2>&1 || status=$?
grep -E '^(FAILED|[0-9]+ passed)' "$log" | sed 's/^/    /' || true
if ((status != 0)) || grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log"; then
  tail -n 40 "$log" | sed 's/^/    /' >&2
  die "the hosted C test failed (exit $status; log: $log)"
fi
g++ -std=c++17 -Wall -Wextra -Werror -Icapi/include capi/tests/c/header.cpp "$HOSTED_LIB" \
  "${SYSTEM_LIBS[@]}" -o "$OUT/header_cpp" || die "the header does not compile warning-free as C++"
"$OUT/header_cpp" >/dev/null || die "the C++ translation unit's program failed"
note "C++: the header compiles warning-free with g++ -std=c++17 and links"

# --- bare metal: the static library for Cortex-M4 and RV32 -------------------------------------
for target in "${BARE_METAL[@]}"; do
  cargo clippy -q -p causeway-capi --no-default-features --target "$target" -- -D warnings ||
    die "clippy reports warnings in the bare-metal C API for $target"
  cargo build -q -p causeway-capi --no-default-features --target "$target" --profile "$PROFILE" ||
    die "the bare-metal static library does not build for $target"
done
M4_LIB=$target_root/thumbv7em-none-eabihf/$PROFILE/libcauseway_capi.a

# --- the C firmware image on qemu --------------------------------------------------------------
ELF=$OUT/c_firmware.elf
# mps2-an386: 4 MiB of code memory at 0, data RAM at 0x2000_0000 (256 KiB used, as the Rust
# images do). Integer-only printf keeps picolibc's float formatting out of the image.
arm-none-eabi-gcc -std=c11 -Wall -Wextra -Werror -Os -g -mcpu=cortex-m4 -mthumb -mfloat-abi=hard \
  -mfpu=fpv4-sp-d16 -ffunction-sections -fdata-sections --specs=picolibc.specs --oslib=semihost \
  --crt0=semihost --picolibc-buildtype=release -DPICOLIBC_INTEGER_PRINTF_SCANF -Icapi/include \
  capi/tests/firmware/main.c "$M4_LIB" -Wl,--gc-sections -Wl,--no-warn-execstack \
  -Wl,--defsym=__flash=0x0 -Wl,--defsym=__flash_size=0x400000 \
  -Wl,--defsym=__ram=0x20000000 -Wl,--defsym=__ram_size=0x40000 -o "$ELF" ||
  die "the C firmware image does not build"
note "running the C firmware image on qemu-system-arm -machine mps2-an386 (timeout ${QEMU_TIMEOUT}s)"
log=$OUT/c_firmware.log
status=0
timeout --kill-after=10 "$QEMU_TIMEOUT" qemu-system-arm -machine mps2-an386 -nographic -monitor none \
  -serial none -semihosting-config enable=on,target=native -kernel "$ELF" </dev/null >"$log" 2>&1 ||
  status=$?
sed 's/^/    /' "$log"
case $status in
  0) ;;
  124 | 137) die "the C firmware image hung: no exit within ${QEMU_TIMEOUT}s (log: $log)" ;;
  *) die "the C firmware image failed with exit status $status (log: $log)" ;;
esac

# Flash: what the image stores (vectors, code, read-only data, .data's initial values); RAM:
# what it occupies statically (.data, .bss), stack excluded — as scripts/firmware.sh counts.
size_of() { # elf -> "flash ram"
  arm-none-eabi-size -A "$1" | awk '
    $1 == ".vector_table" || $1 == ".init" || $1 == ".text" || $1 == ".rodata" { flash += $2 }
    $1 == ".data" { flash += $2; ram += $2 }
    $1 == ".bss" || $1 == ".uninit" { ram += $2 }
    END { print flash + 0, ram + 0 }'
}
printf '\ncapi: firmware sizes on thumbv7em-none-eabihf (Cortex-M4; stack excluded)\n'
printf '  %-58s %9s %11s\n' image flash "static RAM"
read -r flash ram < <(size_of "$ELF")
printf '  %-58s %7d B %9d B\n' "C image on the C API (opt-level \"s\", picolibc)" "$flash" "$ram"
RUST_CONTROLLER=$target_root/firmware/thumbv7em-none-eabihf/release/controller
if [[ -f $RUST_CONTROLLER ]]; then
  read -r flash ram < <(size_of "$RUST_CONTROLLER")
  printf '  %-58s %7d B %9d B\n' "Rust 4-queue controller (tests/firmware)" "$flash" "$ram"
else
  printf '  (the Rust controller beside it: run scripts/firmware.sh first)\n'
fi
printf '  C image code by origin (bytes):\n'
arm-none-eabi-nm -C --radix=d --size-sort -S "$ELF" | awk '
  $3 ~ /^[tT]$/ {
    size = $2 + 0; name = $0; sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, "", name)
    if (name ~ /^cw_/) group = "C API entry points (cw_*)"
    else if (name ~ /causeway_core/) group = "causeway-core"
    else if (name ~ /causeway_capi/) group = "C API internals"
    else if (name ~ /core::fmt|core::str/) group = "Rust core::fmt (error messages)"
    else if (name ~ /compiler_builtins/) group = "compiler_builtins (memcpy, 64-bit division)"
    else if (name == "main" || name ~ /systick|on_third_tick|cw_abort/) group = "the image (main.c)"
    else group = "picolibc, startup, semihosting"
    total[group] += size
  }
  END { for (g in total) printf "    %6d  %s\n", total[g], g }' | sort -rn

note "passed in $((SECONDS - started))s (header, hosted C under ASan+UBSan, C++, Cortex-M4 and RV32 libraries, C firmware on qemu)"
