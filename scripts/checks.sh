#!/usr/bin/env bash
# scripts/checks.sh — what `npm test` checks before its tiers: one strict tsc over product and tests, emitting dist/
# (the tests' children run from it), and prettier. Side by side: tsc leaves part of the second core idle, and
# prettier's check takes as long as its compile. Fails when either fails; both always finish and report.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
node_modules/.bin/prettier --check . &
prettier=$!
npm run --silent build:all
built=$?
wait "$prettier"
formatted=$?
exit $((built != 0 || formatted != 0))
