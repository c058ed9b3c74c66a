#!/usr/bin/env bash
# The line between framework/ and apps/: the framework includes only itself and system
# headers (never a sample app), names no app in its build files, and every module's header is
# included the way it installs (<kagi/<module>/x.hpp>). The conf side (the framework's schema
# names no app key) is Config.TheFrameworkSchemaNamesNoAppKey in tests/unit/config.
set -euo pipefail
root="$1"
cd "$root"
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# Quoted includes are project-relative: the framework has none (they would find apps/).
quoted=$(grep -rn --include='*.hpp' --include='*.cpp' '^\s*#\s*include\s*"' framework || true)
[ -z "$quoted" ] || fail "quoted includes in framework/ (use <kagi/...>):"$'\n'"$quoted"

apps=$(ls -d apps/*/ | xargs -n1 basename | paste -sd'|')
from_apps=$(grep -rnE --include='*.hpp' --include='*.cpp' \
  "^\s*#\s*include\s*[<\"]($apps)/" framework || true)
[ -z "$from_apps" ] || fail "framework/ includes sample apps:"$'\n'"$from_apps"

in_cmake=$(grep -rnE "apps/|kagi_app_" framework --include=CMakeLists.txt || true)
[ -z "$in_cmake" ] || fail "framework/ build files name the apps:"$'\n'"$in_cmake"

# Every <kagi/...> include anywhere names a header that exists where it installs from.
while read -r header; do
  [ -f "framework/$header" ] || fail "#include <$header>: no framework/$header"
done < <(grep -rhoE --include='*.hpp' --include='*.cpp' '#include <kagi/[^>]+>' \
           framework apps tests examples | sed -E 's/#include <(.*)>/\1/' | sort -u)

# A self-check: the include scan must see a planted violation.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/framework/kagi/x"
printf '#include "bbs/bbs.hpp"\n' >"$tmp/framework/kagi/x/planted.hpp"
(cd "$tmp" && grep -rqE --include='*.hpp' "^\s*#\s*include\s*[<\"]($apps)/" framework) ||
  fail "the scan missed a planted include of an app"

[ "$failed" -eq 0 ] && echo "structure: ok" || exit 1
