#!/usr/bin/env bash
# scripts/test's own harness (scripts/lib/run_ctest.sh) can fail: a stage that runs no test
# fails, a failing test fails its stage, a passing one does not, and skips (ctest's and
# GTEST_SKIP's, from gtest's XML report) are listed. Runs on a CTest file written here.
set -uo pipefail
src="$1"
KAGI_ROOT="$src"
source "$src/scripts/lib/run_ctest.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
errors=0
check() {  # check CONDITION-EXIT-CODE MESSAGE
  if [ "$1" -eq 0 ]; then echo "  ok   $2"; else echo "  FAIL $2"; errors=$((errors + 1)); fi
}
stage_failed() { [[ " ${failed[*]} " == *" $1 "* ]]; }

mkdir -p "$tmp/proj"
cat >"$tmp/fake_gtest.sh" <<'SH'
#!/bin/sh
# Writes a gtest XML report with one passed and one skipped case, as a gtest binary does.
dir=${GTEST_OUTPUT#xml:}
cat >"${dir}fake_gtest.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2"><testsuite name="Suite" tests="2">
<testcase name="Runs" status="run" result="completed" classname="Suite"/>
<testcase name="Skips" status="run" result="skipped" classname="Suite"><skipped message="t.cpp:3&#x0A;no birth time here"/></testcase>
</testsuite></testsuites>
XML
SH
chmod +x "$tmp/fake_gtest.sh"
cat >"$tmp/proj/CTestTestfile.cmake" <<CT
add_test(passes "true")
set_tests_properties(passes PROPERTIES LABELS "good")
add_test(fails "false")
set_tests_properties(fails PROPERTIES LABELS "bad")
add_test(skips_77 "sh" "-c" "exit 77")
set_tests_properties(skips_77 PROPERTIES LABELS "skips" SKIP_RETURN_CODE 77)
add_test(fake_gtest "$tmp/fake_gtest.sh")
set_tests_properties(fake_gtest PROPERTIES LABELS "skips")
CT

run_ctest nothing "$tmp/proj" -L no-such-label >/dev/null 2>&1
stage_failed nothing
check $? "a stage that matches no test fails"

run_ctest good "$tmp/proj" -L good >/dev/null 2>&1
! stage_failed good
check $? "a stage whose test passes does not fail"
[ "$total_passed" -eq 1 ]
check $? "its test is counted as passed (got $total_passed)"

run_ctest bad "$tmp/proj" -L bad >/dev/null 2>&1
stage_failed bad
check $? "a stage with a failing test fails"
[ "$total_failed" -eq 1 ]
check $? "its test is counted as failed (got $total_failed)"

run_ctest skips "$tmp/proj" -L skips >/dev/null 2>&1
listed=$(printf '%s\n' "${skipped[@]}")
grep -q "^skips: ctest skips_77$" <<<"$listed"
check $? "a ctest skip is listed (skipped: $listed)"
grep -q "^skips: gtest fake_gtest: Suite.Skips (no birth time here)$" <<<"$listed"
check $? "a GTEST_SKIP case is listed with its reason"
! grep -q "Suite.Runs" <<<"$listed"
check $? "a case that ran is not listed"

echo "test stages: $errors failure(s)"
[ "$errors" -eq 0 ]
