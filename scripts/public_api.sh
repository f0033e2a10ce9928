#!/usr/bin/env bash
# The public API of every published crate, checked against its committed baseline in
# api/<crate>.txt, so that an API change is a deliberate one: it lands together with the
# baseline it changes, and the diff shows up in review.
#
# After a deliberate API change, bless (rewrite) the baselines, then review and commit them:
#
#   CAUSEWAY_BLESS=1 scripts/public_api.sh                            # every crate
#   CAUSEWAY_BLESS=1 scripts/public_api.sh causeway-device causeway   # only these
#
# A change to one crate often shows in others (the drivers implement the device layer's traits,
# the scenario engine's types hold its handles): bless them all unless you know better.
#
# How: the pinned nightly of scripts/nightly.sh writes each crate's rustdoc JSON, with every
# feature on (an API behind a feature is API too); api/lister (a workspace of its own, on the
# `public-api` library that cargo-public-api is built on, pinned there) prints it one item a
# line, sorted, as `cargo public-api -s` would: blanket impls left out, auto-trait impls kept (a
# type that stops being Send is a breaking change). A crate whose docs.rs metadata names a
# `default-target` is listed for that target (platform-windows for Windows, platform-baremetal
# for Cortex-M4): on the host most of their items are cfg'd away. The published crates are the
# workspace members without `publish = false`; on a full run, a baseline left over from a crate
# that is no longer published fails the check too (blessing removes it).
#
# Installs what it needs when missing (the pinned nightly and those targets for it, through
# rustup; the lister is built from its lockfile) and fails with a clear message when something
# cannot be had. Builds into target/public-api.
#
# Usage: [CAUSEWAY_BLESS=1] scripts/public_api.sh [CRATE...]
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'public-api: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'public-api: %s\n' "$*"; }

BASELINES=api
bless=${CAUSEWAY_BLESS:-0}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/public-api

# The published crates: every workspace member without `publish = false`, each with the target
# its docs.rs metadata names (none: the host).
crates=()
declare -A target_of=()
while read -r manifest; do
  grep -qx 'publish = false' "$manifest" && continue
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -n1)
  crates+=("$name")
  target_of[$name]=$(sed -n 's/^default-target = "\(.*\)"$/\1/p' "$manifest")
done < <(cargo metadata --no-deps --format-version 1 --locked |
  grep -o '"manifest_path":"[^"]*"' | sed 's/"manifest_path":"\(.*\)"/\1/' | sort)
((${#crates[@]})) || die "found no published crate in the workspace"
if (($#)); then
  for name in "$@"; do
    [[ -v "target_of[$name]" ]] || die "$name is not a published crate of this workspace"
  done
  selected=("$@")
else
  selected=("${crates[@]}")
fi

# --- set-up ------------------------------------------------------------------------------------
# shellcheck source=scripts/nightly.sh
source scripts/nightly.sh
install_nightly
declare -A selected_of=()
for name in "${selected[@]}"; do
  target=${target_of[$name]:-host}
  selected_of[$target]+=" -p $name"
  if [[ $target != host ]] && ! rustup "+$NIGHTLY" target list --installed | grep -qx "$target"; then
    rustup "+$NIGHTLY" target add "$target" || die "could not install target $target for $NIGHTLY"
  fi
done
cargo fmt --manifest-path api/lister/Cargo.toml -- --check || die "api/lister is not rustfmt-formatted"
cargo build --quiet --locked --manifest-path api/lister/Cargo.toml || die "api/lister does not build"
lister=$CARGO_TARGET_DIR/debug/causeway-api-lister

# --- rustdoc JSON ------------------------------------------------------------------------------
# One cargo command per target, every crate for that target at once.
for target in "${!selected_of[@]}"; do
  arguments=(--lib --no-deps --all-features --locked)
  [[ $target != host ]] && arguments+=(--target "$target")
  # shellcheck disable=SC2086 # a list of -p arguments
  RUSTDOCFLAGS="-Z unstable-options --output-format json" \
    cargo "+$NIGHTLY" doc --quiet "${arguments[@]}" ${selected_of[$target]} ||
    die "rustdoc could not document${selected_of[$target]//-p /}"
done

# --- list and compare --------------------------------------------------------------------------
listed=$(mktemp -d)
trap 'rm -rf "$listed"' EXIT
mkdir -p "$BASELINES"
changed=()
for name in "${selected[@]}"; do
  doc=$CARGO_TARGET_DIR/doc
  [[ -n ${target_of[$name]} ]] && doc=$CARGO_TARGET_DIR/${target_of[$name]}/doc
  "$lister" "$doc/${name//-/_}.json" >"$listed/$name.txt" || die "could not list the API of $name"
  baseline=$BASELINES/$name.txt
  if [[ -f $baseline ]] && cmp -s "$baseline" "$listed/$name.txt"; then
    continue
  fi
  if [[ $bless == 1 ]]; then
    cp "$listed/$name.txt" "$baseline"
    note "blessed $baseline ($(wc -l <"$baseline") items)"
  elif [[ -f $baseline ]]; then
    printf '\n--- %s: the public API differs from %s (- baseline, + now):\n' "$name" "$baseline"
    diff -u "$baseline" "$listed/$name.txt" | tail -n +3 || true
    changed+=("$name")
  else
    printf '\n--- %s: no baseline (%s)\n' "$name" "$baseline"
    changed+=("$name")
  fi
done

# Baselines of crates that are no longer published (only on a full run).
if ((!$#)); then
  for baseline in "$BASELINES"/*.txt; do
    [[ -e $baseline ]] || continue
    name=$(basename "$baseline" .txt)
    [[ -v "target_of[$name]" ]] && continue
    if [[ $bless == 1 ]]; then
      rm "$baseline"
      note "removed $baseline ($name is not a published crate)"
    else
      printf '\n--- %s: a baseline for a crate that is not published\n' "$baseline"
      changed+=("$name")
    fi
  done
fi

if ((${#changed[@]})); then
  die "the public API of ${changed[*]} differs from the baselines in $BASELINES/; if the change is deliberate, run CAUSEWAY_BLESS=1 scripts/public_api.sh and commit $BASELINES/"
fi
note "${#selected[@]} crates match their baselines in $BASELINES/"
