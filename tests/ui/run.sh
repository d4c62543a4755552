#!/bin/sh
# Runs the web UI's browser tests (CTest's `ui` test). Needs `npm ci` in this directory first
# (.ci/setup test does it), Chromium (Debian's `chromium`) and WHEELFORGE_BIN.
cd "$(dirname "$0")" || exit 1
if [ ! -d node_modules/playwright-core ]; then
  echo "SKIPPED: playwright-core is not installed; run 'npm ci' in tests/ui"
  exit 77
fi
if [ ! -x "${WF_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "SKIPPED: no Chromium at ${WF_CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)"
  exit 77
fi
exec node --test ui.test.mjs
