#!/usr/bin/env bash
# docs/TUTORIAL.md's code blocks equal the files they are cut from (scripts/lib/snippets.py),
# and the checker fails on a block that was edited by hand or has no source.
set -euo pipefail
root="$1"
check="$root/scripts/lib/snippets.py"
python3 "$check" --check "$root/docs/TUTORIAL.md"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A block edited by hand: the lock taken after the read.
sed 's|  auto guard = ctx.locks.exclusive(room_lock(room));|  // (lock later)|' \
  "$root/docs/TUTORIAL.md" >"$tmp/edited.md"
if python3 "$check" --check "$tmp/edited.md" >"$tmp/out" 2>&1; then
  echo "FAIL: an edited block passed the check"; exit 1
fi
grep -q "differs from examples/booking/booking.cpp#book" "$tmp/out" ||
  { echo "FAIL: the edited block was not named"; cat "$tmp/out"; exit 1; }
# A C++ block with no source.
printf 'text\n\n```cpp\nint main() {}\n```\n' >"$tmp/unsourced.md"
if python3 "$check" --check "$tmp/unsourced.md" >"$tmp/out" 2>&1; then
  echo "FAIL: a block with no source passed the check"; exit 1
fi
grep -q "no <!-- snippet" "$tmp/out" || { echo "FAIL: no message"; cat "$tmp/out"; exit 1; }
echo "tutorial snippets: ok"
