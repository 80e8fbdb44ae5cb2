# shellcheck shell=bash
# The PASS/FAIL/SKIP lines and their counts, shared by the scripts that run
# real-cluster and package tests (run.sh, tests/packages/*.sh); each ends
# with its own `NAME: N passed, N failed, N skipped` line (tally_line NAME
# [MORE]), which scripts/run-tests reads.
passed=0
failed=0
skipped=0
pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1: $2"; failed=$((failed + 1)); }
skip() { echo "SKIP: $1: $2"; skipped=$((skipped + 1)); }
tally_line() { echo "$1: $passed passed, $failed failed, $skipped skipped${2:+ $2}"; }
