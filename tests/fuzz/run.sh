#!/bin/sh
# Runs one fuzz target for longer than the ctest smoke run.
#   tests/fuzz/run.sh TARGET SECONDS     TARGET: urlencoded multipart cookies percent utf8 request
# Needs a clang build with -DKAGI_FUZZ=ON in $KAGI_FUZZ_BUILD (default: build-fuzz at the
# repo root). New inputs collect in $KAGI_FUZZ_BUILD/tests/fuzz/parsers/work/TARGET/corpus;
# crashes land in .../artifacts/. The checked-in seeds are never modified. Extra arguments go to
# libFuzzer (e.g. -jobs=2 -workers=2).
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${KAGI_FUZZ_BUILD:-$root/build-fuzz}
exe=$build/tests/fuzz/parsers/fuzz_$target
seeds=$here/corpus/$target
if [ ! -x "$exe" ]; then
  echo "$exe not found: configure with CC=clang CXX=clang++ cmake -S $root -B $build" \
       "-DKAGI_FUZZ=ON and build fuzz_$target" >&2
  exit 2
fi
if [ ! -d "$seeds" ]; then
  echo "no seed corpus $seeds: unknown target '$target'" >&2
  exit 2
fi
work=$build/tests/fuzz/parsers/work/$target
mkdir -p "$work/corpus" "$work/artifacts"
dict=$here/dict/$target.dict
if [ -f "$dict" ]; then set -- -dict="$dict" "$@"; fi
exec "$exe" "$work/corpus" "$seeds" -max_total_time="$seconds" -rss_limit_mb=2048 \
  -timeout=10 -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$@"
