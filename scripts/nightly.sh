# Sourced by the scripts that need a nightly compiler (Miri in test-all.sh, cargo-fuzz in
# fuzz.sh): the one nightly they use, pinned like the stable compiler in rust-toolchain.toml,
# so a fresh machine runs them with the compiler they were last checked with. The caller
# defines `die` and `note`.
NIGHTLY=nightly-2026-05-20

# install_nightly COMPONENT... — installs the pinned nightly with these components if missing.
install_nightly() {
  command -v rustup >/dev/null || die "rustup is required to install $NIGHTLY"
  if ! rustup toolchain list | grep -q "^$NIGHTLY"; then
    note "installing $NIGHTLY"
    rustup toolchain install "$NIGHTLY" --profile minimal || die "could not install $NIGHTLY"
  fi
  local component missing=()
  for component in "$@"; do
    rustup "+$NIGHTLY" component list --installed | grep -q "^$component" || missing+=("$component")
  done
  if ((${#missing[@]})); then
    rustup "+$NIGHTLY" component add "${missing[@]}" || die "could not install ${missing[*]} for $NIGHTLY"
  fi
}
