# Sourced by the tier scripts: installs missing apt packages, or dies with a clear message.
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
