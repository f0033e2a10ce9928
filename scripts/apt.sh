# Sourced by the tier scripts: installs missing apt packages, or dies with a clear message; and
# the helpers the scripts share (their one optional argument, running work a few at a time).
# The caller defines `die` and `note` (each prefixes its own name).

# apt_install WHAT PACKAGE... — WHAT names the tools for the message when apt-get is absent.
apt_install() {
  local what=$1
  shift
  (($#)) || return 0
  command -v apt-get >/dev/null || die "missing $* and no apt-get to install them; install $what"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
  note "installing $*"
  if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "$@" >/dev/null; }; then
    die "could not install $* (needs root or passwordless sudo, and apt sources)"
  fi
}

# apt_require WHAT PACKAGE... — installs those of the Debian packages that are not installed.
apt_require() {
  local what=$1 package missing=()
  shift
  command -v dpkg >/dev/null || die "no dpkg to check for $*: install $what by hand"
  for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  apt_install "$what" "${missing[@]}"
}

# tier_arguments SCRIPT [ARG] — the tier scripts' one optional argument: sets `setup_only`
# (true for --setup-only: install and check, run no test); dies on anything else.
tier_arguments() {
  local script=$1
  shift
  setup_only=false
  case "${1:-}" in
    "") ;;
    --setup-only) setup_only=true ;;
    *) die "unknown argument $1 (usage: $script [--setup-only])" ;;
  esac
}

# at_most JOBS FUNCTION ITEM... — runs FUNCTION ITEM for every item, JOBS of them at a time, and
# returns when all have ended. FUNCTION records its own outcome (the callers write a file per
# item), so a failing item neither stops the others nor fails this call.
at_most() {
  local jobs=$1 function=$2 running=0 item
  shift 2
  for item in "$@"; do
    if ((running >= jobs)); then
      wait -n || true
      running=$((running - 1))
    fi
    "$function" "$item" &
    running=$((running + 1))
  done
  wait || true
}
