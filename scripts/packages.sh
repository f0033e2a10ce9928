#!/usr/bin/env bash
# Packaging: every crate the workspace publishes is checked for the metadata crates.io shows,
# then packaged as `cargo publish` would package it and built from its package alone, the way a
# user's build gets it.
#
# 1. Metadata: every published crate (a workspace member without `publish = false`) has a
#    description, a license, readme = "README.md", keywords, categories, documentation and a
#    rust-version, and its folder holds README.md, LICENSE-APACHE and LICENSE-MIT (links to the
#    root's files, which cargo packages as files). No placeholder repository URL.
# 2. `cargo package --workspace`: each crate's .crate file, in dependency order, each unpacked
#    and built against the packages of the crates it depends on (a local registry of the
#    workspace's packages, not the workspace folders), so a file a crate reads from outside its
#    own folder, a dependency without a version or a feature a crate uses but does not turn on
#    fails here. Twice: with default features (what most users build, and where a feature
#    missing from a crate's own manifest shows) and with all features (the drivers behind the
#    facade's features, MPI behind the scenario engine's and the CLI's).
# 3. rust-version: the published crates' libraries, all features on, type-check with the
#    compiler their rust-version names (1.85 for most; 1.88 where cudarc's libloading needs it),
#    installed through rustup (minimal profile) when missing, into target/msrv.
#
# Packaged too: causeway-example-dma-engine (never published: an example driver to read; built
# here against the packaged crates, which shows it uses only their published API). Not
# packaged: causeway-cli-browser (never published: a test tier that reaches the CLI through a
# path dependency without a version).
#
# Builds offline (after one `cargo fetch` of everything the lockfile names) into a target folder
# of its own, target/packages. Cargo takes a package of a registry as unchanging once it has one
# of that version: it unpacks it once (into $CARGO_HOME/registry/src/-<hash>/, for the local
# registry cargo package makes of the workspace's packages in target/packages/package) and never
# rebuilds it. A second run after a change would then build the crates on last run's copies of
# the crates they depend on (stale, found when a crate started calling a function new in its
# dependency). The dep-info of the last run's builds names those copies only when the target
# folder survived: a clean checkout at a path where an earlier checkout ran (CI's) has no
# target folder but the same registry hash, and built on a copy from days before (a crate
# missing a type its dependency had gained since). So every run removes every unpacked copy of
# a causeway package from every local registry, and everything built from the workspace's
# packages in target/packages; the other dependencies' builds stay. A lock in $CARGO_HOME keeps
# two checkouts' runs of this step from removing each other's copies mid-build.
#
# Usage: scripts/packages.sh
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'packages: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'packages: %s\n' "$*"; }

# --- metadata ----------------------------------------------------------------------------------
grep -q 'example\.invalid' Cargo.toml && die "Cargo.toml still has the placeholder repository URL"
published=0
problems=()
while read -r manifest; do
  grep -qx 'publish = false' "$manifest" && continue
  published=$((published + 1))
  folder=$(dirname "$manifest")
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -n1)
  for key in description license keywords categories documentation rust-version; do
    grep -qE "^$key(\.workspace = true| = )" "$manifest" || problems+=("$name: no $key")
  done
  grep -qx 'readme = "README.md"' "$manifest" || problems+=("$name: readme is not README.md")
  grep -q '^repository' "$manifest" && problems+=("$name: has a repository key")
  for file in README.md LICENSE-APACHE LICENSE-MIT; do
    [[ -f $folder/$file ]] || problems+=("$name: no $file in $folder (a link to the root's will do)")
  done
done < <(cargo metadata --no-deps --format-version 1 --locked --offline |
  grep -o '"manifest_path":"[^"]*"' | sed 's/"manifest_path":"\(.*\)"/\1/' | sort)
if ((${#problems[@]})); then
  printf '  %s\n' "${problems[@]}" >&2
  die "${#problems[@]} metadata problems in the published crates"
fi
note "$published published crates have their metadata, README and license files"

# --- package and build -------------------------------------------------------------------------
# Everything the lockfile names, for every target: the packages are resolved and built offline,
# and with all features on they need optional dependencies (critical-section for core's
# `isr-safe`) that the host builds before this step never downloaded.
cargo fetch --locked --quiet || die "cargo fetch could not download the lockfile's dependencies"
target=${CARGO_TARGET_DIR:-$PWD/target}
packages_target=$target/packages
cargo_home=${CARGO_HOME:-$HOME/.cargo}
exec {lock}>"$cargo_home/causeway-packages.lock"
flock "$lock"
# Local registries' folders are named `-<hash>` (crates.io's starts with its host name).
for unpacked in "$cargo_home"/registry/src/-*/causeway*; do
  [[ -e $unpacked ]] && rm -rf "$unpacked"
done
rm -rf "$packages_target/package" "$packages_target"/debug/{deps,.fingerprint,build}/*causeway*
package=(env CARGO_TARGET_DIR="$packages_target" cargo package --workspace --exclude causeway-cli-browser --locked --offline --allow-dirty
  --no-metadata --config 'profile.dev.package."*".debug=false')
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
note "default features"
"${package[@]}" || die "a crate does not package, or does not build from its package (default features)"
note "all features"
"${package[@]}" --all-features ||
  die "a crate does not package, or does not build from its package (all features)"
note "every crate packages and builds from its package"

# --- rust-version ------------------------------------------------------------------------------
unset CARGO_PROFILE_DEV_DEBUG
declare -A crates_of=()
while read -r manifest; do
  grep -qx 'publish = false' "$manifest" && continue
  name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -n1)
  version=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$manifest")
  [[ -n $version ]] || grep -qx 'rust-version.workspace = true' "$manifest" ||
    die "$name: no rust-version"
  version=${version:-$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)}
  # The facade's `cuda` feature needs 1.88 (cudarc's libloading), more than its rust-version:
  # checked below, with its other features on its rust-version and all of them on 1.88.
  [[ $name == causeway ]] || crates_of[$version]+=" -p $name"
done < <(cargo metadata --no-deps --format-version 1 --locked --offline |
  grep -o '"manifest_path":"[^"]*"' | sed 's/"manifest_path":"\(.*\)"/\1/' | sort)
for version in "${!crates_of[@]}"; do
  toolchain=$version.0
  [[ $version == *.*.* ]] && toolchain=$version
  if ! rustup toolchain list | grep -q "^$toolchain-"; then
    note "installing Rust $toolchain (the rust-version of${crates_of[$version]//-p /})"
    rustup toolchain install "$toolchain" --profile minimal || die "could not install Rust $toolchain"
  fi
  note "rust-version $version:${crates_of[$version]//-p /}"
  # shellcheck disable=SC2086 # a list of -p arguments
  CARGO_TARGET_DIR=$target/msrv cargo "+$toolchain" check --locked --offline \
    ${crates_of[$version]} --all-features ||
    die "a crate does not build with Rust $toolchain, the rust-version it declares"
done
facade=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -n1).0
cuda=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' drivers/cuda/Cargo.toml).0
note "rust-version: causeway with its features but cuda on $facade, with all of them on $cuda"
CARGO_TARGET_DIR=$target/msrv cargo "+$facade" check --locked --offline \
  -p causeway --features cpu,vulkan,npu,mpi || die "causeway does not build with Rust $facade"
CARGO_TARGET_DIR=$target/msrv cargo "+$cuda" check --locked --offline \
  -p causeway --all-features || die "causeway with feature cuda does not build with Rust $cuda"
note "every published crate builds with the compiler its rust-version names"
