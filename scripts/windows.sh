#!/usr/bin/env bash
# Tier 4, Windows: cross-compiles for x86_64-pc-windows-gnu and runs under wine64, each test
# binary under a timeout: the Windows platform crate's tests (WaitOnAddress futex, pinning),
# core's unit tests (the executor, semaphores, frontiers), the std-parking futex's contract, and
# the hosted runtime on Windows: the CPU driver's, the root package's and the CLI crate's tests
# (pool, device, block processor, streams, coroutines, executor stress, the CLI and every
# bundled scenario), with workers parking on WaitOnAddress.
#
# Debian's wine 8 lacks the ProcessPrng export (bcryptprimitives.dll) that Rust's std imports,
# so the wine prefix (target/wine/prefix) gets a tiny stand-in DLL built from
# platform/windows/wine/ with mingw. Installs what it needs when missing (the rustup target;
# gcc-mingw-w64-x86-64 and wine64 through apt-get) and fails with a clear message when
# something cannot be had: nothing is skipped. Idempotent; quick on a warm machine.
#
# Environment: WINE_TIMEOUT (seconds per test binary, default 300), WINE_JOBS (test binaries run
# at a time, default one per core).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'windows: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'windows: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

TARGET=x86_64-pc-windows-gnu
WINE_TIMEOUT=${WINE_TIMEOUT:-300}
WINE_DIR=$PWD/target/wine
SHIM_SOURCES=(platform/windows/wine/process_prng.c platform/windows/wine/bcryptprimitives.def)
# What runs under wine: every unit and integration test of these packages. One cargo command
# builds them all: cargo resolves features per selection of packages, so a command per package
# would compile the shared dependencies (core, syn, serde, proptest...) once per command.
PACKAGES=(causeway-platform-windows causeway-core causeway-platform-linux causeway-runtime
  causeway-device causeway-driver-cpu causeway causeway-scenario causeway-cli)
# Test binaries run this many at a time (default: one per core); each one's output is printed
# whole when it ends.
WINE_JOBS=${WINE_JOBS:-$(nproc)}
[[ $WINE_JOBS =~ ^[1-9][0-9]*$ ]] || die "WINE_JOBS must be a positive integer, not '$WINE_JOBS'"

# --- set-up ------------------------------------------------------------------------------------
command -v rustup >/dev/null || die "rustup is required to install the $TARGET target"
if ! rustup target list --installed | grep -qx "$TARGET"; then
  note "installing rustup target $TARGET"
  rustup target add "$TARGET" || die "could not install rustup target $TARGET"
fi

find_wine() {
  command -v wine64 || { [[ -x /usr/lib/wine/wine64 ]] && echo /usr/lib/wine/wine64; } || true
}
missing_packages=()
command -v x86_64-w64-mingw32-gcc >/dev/null || missing_packages+=(gcc-mingw-w64-x86-64)
[[ -n $(find_wine) ]] || missing_packages+=(wine64)
apt_install "mingw-w64 and wine64" "${missing_packages[@]}"
command -v x86_64-w64-mingw32-gcc >/dev/null || die "x86_64-w64-mingw32-gcc is still missing"
WINE=$(find_wine)
[[ -n $WINE ]] || die "wine64 is still missing after installation"
WINESERVER=$(command -v wineserver || echo "$(dirname "$WINE")/wineserver")
[[ -x $WINESERVER ]] || die "wineserver not found next to $WINE"
command -v timeout >/dev/null || die "coreutils' timeout is required to bound the wine runs"
note "$("$WINE" --version) at $WINE"

export WINEPREFIX=$WINE_DIR/prefix WINEARCH=win64 WINEDEBUG=-all
# The stand-in must win over anything wine itself might offer.
export WINEDLLOVERRIDES="bcryptprimitives=n,b"
unset DISPLAY
mkdir -p "$WINE_DIR"
if [[ ! -f $WINEPREFIX/system.reg ]]; then
  note "creating the wine prefix $WINEPREFIX"
  timeout 300 "$WINE" wineboot --init >/dev/null 2>&1 || die "wineboot could not create $WINEPREFIX"
  "$WINESERVER" -w
fi
SYSTEM32=$WINEPREFIX/drive_c/windows/system32
[[ -d $SYSTEM32 ]] || die "the wine prefix has no system32 ($SYSTEM32); delete $WINEPREFIX and rerun"
shim=$WINE_DIR/bcryptprimitives.dll
if [[ ! -f $shim || ${SHIM_SOURCES[0]} -nt $shim || ${SHIM_SOURCES[1]} -nt $shim ]]; then
  note "building the ProcessPrng stand-in bcryptprimitives.dll"
  x86_64-w64-mingw32-gcc -O2 -s -shared -o "$shim" "${SHIM_SOURCES[@]}" -ladvapi32 ||
    die "mingw could not build $shim"
fi
cmp -s "$shim" "$SYSTEM32/bcryptprimitives.dll" || cp "$shim" "$SYSTEM32/bcryptprimitives.dll"

# --- build and lint ----------------------------------------------------------------------------
# The root clippy run sees only the host: the Windows code is linted for its own target here.
package_arguments=("${PACKAGES[@]/#/-p}")
# Linted for the Windows target besides the host's clippy run (benches are Linux-only floors).
cargo clippy --target "$TARGET" "${package_arguments[@]}" --lib --bins --tests -- -D warnings ||
  die "clippy reports warnings for $TARGET (${PACKAGES[*]})"
json=$(cargo test --target "$TARGET" "${package_arguments[@]}" --lib --tests --no-run \
  --message-format=json-render-diagnostics) || die "the tests do not build for $TARGET"
# Test harnesses only (a profile with "test":true): a package's own binaries (the CLI) are built
# for its integration tests but are not tests.
mapfile -t executables < <(grep -E '"profile":\{[^}]*"test":true' <<<"$json" |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
((${#executables[@]})) || die "no test executables were built for $TARGET"

# --- run ---------------------------------------------------------------------------------------
LOGS=$WINE_DIR/logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
# Runs one test binary under wine; its exit status goes to LOGS/NAME.status.
run_one() {
  local exe=$1 name status=0
  name=$(basename "$exe" .exe)
  timeout --kill-after=10 "$WINE_TIMEOUT" "$WINE" "$exe" </dev/null >"$LOGS/$name.log" 2>&1 ||
    status=$?
  echo "$status" >"$LOGS/$name.status"
}
note "running ${#executables[@]} test binaries under wine, $WINE_JOBS at a time (timeout ${WINE_TIMEOUT}s each)"
at_most "$WINE_JOBS" run_one "${executables[@]}"

failures=()
for exe in "${executables[@]}"; do
  name=$(basename "$exe" .exe)
  note "$name:"
  sed 's/^/    /' "$LOGS/$name.log"
  status=$(cat "$LOGS/$name.status" 2>/dev/null || echo "no status")
  case $status in
    0) ;;
    124 | 137) failures+=("$name hung: no exit within ${WINE_TIMEOUT}s") ;;
    53) failures+=("$name could not load a DLL (exit 53): is the ProcessPrng stand-in in $SYSTEM32?") ;;
    *) failures+=("$name failed with exit status $status") ;;
  esac
done
"$WINESERVER" -k 2>/dev/null || true
if ((${#failures[@]})); then
  printf 'windows: FAILED: %s\n' "${failures[@]}" >&2
  exit 1
fi
note "${#executables[@]} test binaries passed under wine"
