#!/bin/sh
# Runs the web UI's browser tests (CTest's `ui` test). Needs `npm ci` in this directory first
# (.ci/setup test does it), Chromium (Debian's `chromium`) and WHEELFORGE_BIN.
# Without the tools the test reports itself skipped (77) on a developer machine; under CI
# (CI=true) a missing tool is a failure, so the browser tests can never silently not run.
cd "$(dirname "$0")" || exit 1
missing() {
  echo "$1"
  if [ "${CI:-}" = true ]; then
    echo "FAILED: CI=true and the browser tests cannot run"
    exit 1
  fi
  echo "SKIPPED"
  exit 77
}
[ -d node_modules/playwright-core ] ||
  missing "playwright-core is not installed; run 'npm ci' in tests/ui"
[ -x "${WF_CHROMIUM:-/usr/bin/chromium}" ] ||
  missing "no Chromium at ${WF_CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"
exec node --test ui.test.mjs
