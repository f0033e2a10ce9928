#!/usr/bin/env bash
# The guide: builds docs/ (an mdBook: docs/book.toml, chapters in docs/src) with the pinned
# mdbook into target/book, and fails if mdbook prints any warning or error (it exits 0 on some of
# both); then scripts/check_links.py checks every link of the book and of README.md, offline:
# relative links, images and #anchors resolve, in the sources and in the built pages, and
# external links are well-formed. The chapters' Rust snippets are doctests of the `causeway`
# package (src/lib.rs includes every chapter), run by `cargo test --doc -p causeway` and by the
# test command's tiers 1 and 3, not here.
#
# Installs what it needs when missing: mdbook, by `cargo install --locked` of the pinned version
# into $CAUSEWAY_TOOLS/mdbook-<version> (default $CARGO_HOME/causeway-tools, so a fresh checkout
# finds it installed; no root needed, about two and a half minutes of compiling on a two-core
# machine, once), and python3 through apt-get. Fails with a clear message when something cannot
# be had.
#
# Usage: scripts/book.sh [--setup-only]   (--setup-only: install and check, build nothing)
# Then open target/book/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'book: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'book: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

tier_arguments scripts/book.sh "$@"

# Raise it in its own commit, after building the book with the new version: book.toml's keys
# and the warnings mdbook gives change between releases.
MDBOOK_VERSION=0.5.4
# Beside cargo's own tools, so a fresh checkout of the repository finds it installed.
tools=${CAUSEWAY_TOOLS:-${CARGO_HOME:-$HOME/.cargo}/causeway-tools}
[[ $tools == /* ]] || tools=$PWD/$tools
mdbook=$tools/mdbook-$MDBOOK_VERSION/bin/mdbook
BOOK=target/book

if [[ ! -x $mdbook ]] || [[ $("$mdbook" --version 2>/dev/null) != "mdbook v$MDBOOK_VERSION" ]]; then
  note "installing mdbook $MDBOOK_VERSION into $tools/mdbook-$MDBOOK_VERSION"
  # The renderer and its search index only: the `serve` and `watch` features (a web server,
  # file watching) are not needed to build and would double the compile. Built in cargo's own
  # temporary folder, not the workspace's target directory, and with the pinned compiler.
  env -u CARGO_TARGET_DIR cargo install --locked --quiet mdbook --version "$MDBOOK_VERSION" \
    --no-default-features --features search --root "$tools/mdbook-$MDBOOK_VERSION" ||
    die "could not install mdbook $MDBOOK_VERSION (cargo install needs crates.io)"
fi
[[ $("$mdbook" --version) == "mdbook v$MDBOOK_VERSION" ]] ||
  die "$mdbook is not mdbook $MDBOOK_VERSION"
command -v python3 >/dev/null || apt_install "python3 (for scripts/check_links.py)" python3
command -v python3 >/dev/null || die "python3 is not on PATH; reinstall python3"
note "$("$mdbook" --version), $(python3 --version)"

if $setup_only; then
  exit 0
fi

# A fresh build, so that no page of an earlier build (a chapter since removed) is checked.
rm -rf "$BOOK"
mkdir -p target
log=target/book.log
status=0
"$mdbook" build docs --dest-dir "$PWD/$BOOK" >"$log" 2>&1 || status=$?
cat "$log"
((status == 0)) || die "mdbook build failed (exit $status)"
if grep -E '(^|[[:space:]])(WARN|ERROR)([[:space:]]|$)' "$log" >/dev/null; then
  die "mdbook warned (above): warnings fail the build"
fi
python3 scripts/check_links.py "$BOOK"
note "passed: open $BOOK/index.html"
