#!/usr/bin/env bash
# Clones the committed tree into a temp dir and runs the README's first command,
# scripts/demo, there (on a spare port); passes when the demo answers its front page, the
# BBS, the chat, a static asset, and the admin page with the login scripts/demo printed. (The second command, scripts/test, is what runs this.)
set -euo pipefail
src="$1"
work=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

git clone -q --depth 1 "file://$src" "$work/kagi"
grep -q '^scripts/demo' "$work/kagi/README.md" || { echo "README quick start lost scripts/demo"; exit 1; }
grep -q '^scripts/test' "$work/kagi/README.md" || { echo "README quick start lost scripts/test"; exit 1; }

port=$((20000 + RANDOM % 20000))
( cd "$work/kagi" && exec scripts/demo --http "127.0.0.1:$port" ) >"$work/demo.log" 2>&1 &
pid=$!
for _ in $(seq 1 900); do
  if curl -fsS "http://127.0.0.1:$port/" -o "$work/home.html" 2>/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "scripts/demo exited:"; tail -40 "$work/demo.log"; exit 1; }
  sleep 1
done
grep -q 'kagi demo' "$work/home.html" || { echo "front page missing"; tail -40 "$work/demo.log"; exit 1; }
curl -fsS "http://127.0.0.1:$port/static/kagi.css" | grep -q 'font' || { echo "static asset missing"; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/no-such-page")
[ "$code" = 404 ] || { echo "expected 404, got $code"; exit 1; }
for page in /bbs/ /chat/; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$page")
  [ "$code" = 200 ] || { echo "$page answered $code"; exit 1; }
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/admin/locks")
[ "$code" = 401 ] || { echo "/admin/locks without a login answered $code, want 401"; exit 1; }
password=$(sed -n 's/^admin pages: user admin, password \([^ ]*\) .*/\1/p' "$work/demo.log")
[ -n "$password" ] || { echo "scripts/demo printed no admin password"; tail -20 "$work/demo.log"; exit 1; }
curl -fsS -u "admin:$password" "http://127.0.0.1:$port/admin/locks" -o "$work/admin.html" &&
  grep -q '<h1>Locks</h1>' "$work/admin.html" || { echo "/admin/locks with the printed login failed"; exit 1; }
echo "quickstart: scripts/demo from a fresh clone serves http://127.0.0.1:$port/"
