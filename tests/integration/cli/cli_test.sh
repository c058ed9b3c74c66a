#!/usr/bin/env bash
# kagi-demo's command line and config errors: exit 2 with one clear line naming the key or
# the argument; --print-config shows the effective config; a good start serves.
set -uo pipefail
demo="$1"
src="$2"
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect EXIT_CODE TEXT -- ARGS...: runs kagi-demo, checks the exit code and that the output
# mentions TEXT.
expect() {
  local want="$1" text="$2"; shift 3
  local out code
  out=$(cd "$tmp" && timeout 10 "$demo" "$@" 2>&1); code=$?
  if [ "$code" != "$want" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL kagi-demo $* -> exit $code (want $want), output: $out"
    failed=$((failed + 1))
  else
    echo "ok   kagi-demo $* -> exit $code, says '$text'"
  fi
}

expect 2 "unknown config key 'server.thread'" -- --set server.thread=4
expect 2 "server.threads" -- --set server.threads=0
expect 2 "from 1 to 512" -- --set server.threads=0
expect 2 "data.fsync" -- --set data.fsync=sometimes
expect 2 "section.key=value" -- --set nonsense
expect 2 "unknown argument '--bogus'" -- --bogus
expect 2 "--conf needs a value" -- --conf
expect 2 "/nonexistent/kagi.toml" -- --conf /nonexistent/kagi.toml
printf '[server]\nthreads = "four"\n' >"$tmp/bad.toml"
expect 2 "server.threads" -- --conf "$tmp/bad.toml"
printf '[sever]\nthreads = 4\n' >"$tmp/typo.toml"
expect 2 "sever.threads" -- --conf "$tmp/typo.toml"
expect 2 "bbs.boards" -- --set "bbs.boards=../etc" --set "templates.dir=$src/templates" \
  --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks" --http 127.0.0.1:0
# The run above claimed $tmp/data for its lock domain (locks.dir $tmp/locks). Another locks.dir
# on the same data.dir is a second lock domain: refused at start, unless adopted on purpose
# (which then gets as far as the board name again).
expect 2 "data.adopt_lock_domain" -- --set "bbs.boards=../etc" --set "templates.dir=$src/templates" \
  --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks2" --http 127.0.0.1:0
expect 2 "bbs.boards" -- --set "bbs.boards=../etc" --set "templates.dir=$src/templates" \
  --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks2" --set data.adopt_lock_domain=true \
  --http 127.0.0.1:0
expect 2 "it records 'local host=" -- --set "templates.dir=$src/templates" \
  --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks" --http 127.0.0.1:0
# The postgres lock backend needs a DSN that parses; both are said at start (no server needed).
expect 2 "locks.postgres.dsn" -- --set locks.backend=postgres --set "templates.dir=$src/templates" \
  --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks" --http 127.0.0.1:0
expect 2 "does not parse" -- --set locks.backend=postgres --set "locks.postgres.dsn=host='oops" \
  --set "templates.dir=$src/templates" --set "data.dir=$tmp/data" --set "locks.dir=$tmp/locks" \
  --http 127.0.0.1:0
expect 2 'local|postgres|dir|lockd' -- --set locks.backend=redis
printf '[locks.postgres]\ndns = "host=db1"\n' >"$tmp/pgtypo.toml"
expect 2 "locks.postgres.dns" -- --conf "$tmp/pgtypo.toml"
expect 0 "server.threads = 8" -- --conf "$src/conf/kagi.toml" --set server.threads=8 --print-config
expect 0 "usage: kagi-demo" -- --help
# Every key of the framework and the mounted apps, with its default, as TOML.
expect 0 'boards = ["general"]  # list of strings: board names' -- --help-conf
expect 0 "fallback_dir = \"\"" -- --help-conf
expect 2 "unknown config key 'bbs.bords' in [bbs]" -- --set bbs.bords=a

[ "$failed" -eq 0 ] && echo "cli: all passed" || { echo "cli: $failed failed"; exit 1; }
