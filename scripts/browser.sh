#!/usr/bin/env bash
# The browser tier: the HTML view of real runs (`causeway run --html`, `causeway view`) opened
# in Debian's headless Chromium and driven through chromedriver (cli/browser). Every bundled
# scenario's page is stepped to the end with its own controls and read back against the run's
# report; a 10^4-operation page's first paint and stepping are measured and printed.
#
# Installs chromium and chromium-driver through apt-get when missing and fails with a clear
# message when they cannot be had: the tier is never skipped. Pages and screenshots land in
# target/browser (or $CAUSEWAY_BROWSER_OUT).
#
# Usage: scripts/browser.sh [--setup-only]   (--setup-only: install and check, run no test)
# Environment: CAUSEWAY_CARGO_SELECTION (the packages and features cargo builds the test with;
# default -p causeway-cli-browser; the test command passes its own, so its build is reused).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'browser: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'browser: %s\n' "$*"; }
# shellcheck source=scripts/apt.sh
source scripts/apt.sh

tier_arguments scripts/browser.sh "$@"

PACKAGES=(chromium chromium-driver)
apt_require "Chromium and its chromedriver (or set CAUSEWAY_CHROMIUM and CAUSEWAY_CHROMEDRIVER)" "${PACKAGES[@]}"

export CAUSEWAY_CHROMIUM=${CAUSEWAY_CHROMIUM:-/usr/bin/chromium}
export CAUSEWAY_CHROMEDRIVER=${CAUSEWAY_CHROMEDRIVER:-/usr/bin/chromedriver}
[[ -x $CAUSEWAY_CHROMIUM ]] || die "$CAUSEWAY_CHROMIUM is not an executable; reinstall chromium"
[[ -x $CAUSEWAY_CHROMEDRIVER ]] || die "$CAUSEWAY_CHROMEDRIVER is not an executable; reinstall chromium-driver"
note "$("$CAUSEWAY_CHROMIUM" --version 2>/dev/null || echo "chromium: version unknown")"
note "$("$CAUSEWAY_CHROMEDRIVER" --version 2>/dev/null | head -n1 || echo "chromedriver: version unknown")"

if $setup_only; then
  exit 0
fi

# The tests are #[ignore]d so that `cargo test --workspace` needs no browser; here they must run.
selection=${CAUSEWAY_CARGO_SELECTION:--p causeway-cli-browser}
# shellcheck disable=SC2086 # $selection is a list of cargo arguments
cargo test $selection --test browser -- --ignored --test-threads=1 --nocapture
note "pages and screenshots: ${CAUSEWAY_BROWSER_OUT:-target/browser}"
