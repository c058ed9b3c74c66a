# run_ctest for scripts/test: one ctest run whose stage fails when a test fails *or when it
# ran none*, with every skip collected. Source it; it keeps its results in these globals:
failed=()        # stages that failed
skipped=()       # "stage: what" for each skipped ctest entry and skipped gtest case
total_passed=0   # ctest entries passed, over all stages
total_failed=0   # ctest entries failed, over all stages

# run_ctest STAGE DIR [ctest args...]: runs ctest in DIR. The stage fails when a test fails or
# when nothing matched (--no-tests=error). Counts go to the totals; skipped ctest entries and
# skipped gtest cases (read from the XML each gtest binary writes) go to the skip list.
run_ctest() {
  local stage=$1 dir=$2
  shift 2
  local log="$dir/ctest-$stage.log" xml="$dir/gtest-xml/$stage"
  rm -rf "$xml"
  mkdir -p "$xml"
  local rc=0
  GTEST_OUTPUT="xml:$xml/" ctest --test-dir "$dir" --no-tests=error --output-on-failure "$@" \
    2>&1 | tee "$log" || rc=$?
  local passed failed_n
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log" || true)
  failed_n=$(grep -cE 'Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception)' "$log" || true)
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed_n))
  while IFS= read -r line; do
    skipped+=("$stage: $line")
  done < <(grep -E 'Test +#[0-9]+: .*(\*\*\*Skipped|\*\*\*Not Run)' "$log" |
    sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+).*/ctest \1/' || true)
  while IFS= read -r line; do
    skipped+=("$stage: $line")
  done < <(python3 "$KAGI_ROOT/scripts/lib/gtest_skips.py" "$xml")
  if [ "$rc" -ne 0 ] || [ "$passed" -eq 0 ]; then
    failed+=("$stage")
  fi
}
