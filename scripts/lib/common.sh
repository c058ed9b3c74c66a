# Shared by scripts/demo, scripts/test and scripts/bench: package lists, installing them,
# configuring and building. Source it; it does nothing on its own.

KAGI_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JOBS="${KAGI_JOBS:-2}"

# What building kagi and running kagi-demo needs.
KAGI_BUILD_PACKAGES=(build-essential cmake pkg-config libboost-dev libctemplate-dev
  libtoml11-dev libpq-dev libsqlite3-dev)
# What scripts/demo needs on top: htpasswd for the demo's admin login.
KAGI_DEMO_PACKAGES=(apache2-utils)
# And scripts/demo --hosts N on top of that: the shared database, the load balancer, and curl,
# with which it waits for each host to answer.
KAGI_DEMO_CLUSTER_PACKAGES=(postgresql nginx curl procps util-linux)
# What the tests need on top: test frameworks, sanitizer/fuzzer runtimes, the real servers.
# libfcgi-dev: the C FastCGI hello the HTTP benchmarks compare with; dpkg-dev: dpkg-shlibdeps,
# with which CPack computes the .deb packages' dependencies (tests/integration/install);
# php8.2-cli: kagi-lockd's PHP client and its tests (clients/php); redis-server: what the
# kagi-lockd benchmark's smoke run compares with (tests/bench/lockd).
KAGI_TEST_PACKAGES=(libgtest-dev libbenchmark-dev clang libclang-rt-14-dev clang-format
  nginx apache2 apache2-utils spawn-fcgi python3 curl procps iproute2 chromium wrk libfcgi-dev
  dpkg-dev doxygen postgresql nfs-kernel-server php8.2-cli redis-server)
# (nfs-kernel-server: integration_lock_dir_nfs exports and mounts a folder over loopback where
# the kernel has the NFS server and client; elsewhere it skips, saying why.)
# What scripts/bench needs on top (apache2-utils: htpasswd, for kagi's admin statistics).
KAGI_BENCH_PACKAGES=(wrk nginx spawn-fcgi python3 php8.2-fpm php8.2-opcache libfcgi-dev
  postgresql redis-server nodejs linux-perf apache2-utils)

# Each step says how long the script has run, so a slow step shows in any log (CI's included).
log() { printf '\n== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# Installs the packages that are missing (as root, with apt-get); a no-op when all are there.
install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Packages like nginx and apache2 try to start their system service on install; kagi's
  # tests start their own instances, so keep the system ones from starting.
  local policy=/usr/sbin/policy-rc.d created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    created_policy=1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  [ "$created_policy" -eq 1 ] && $sudo rm -f "$policy"
  return 0
}

# Node.js + npm for the browser tests (playwright-core drives Debian's chromium). A machine
# that already has node (e.g. from another repository) keeps it: installing Debian's npm
# over it would conflict.
install_node() {
  command -v node >/dev/null && command -v npm >/dev/null && return 0
  install_packages nodejs npm
}

# npm ci in tests/browser when its lock file changed since the last install.
install_browser_deps() {
  local dir="$KAGI_ROOT/tests/browser"
  [ -f "$dir/package-lock.json" ] || return 0
  if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
     [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    log "npm ci (tests/browser)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# configure_build DIR [cmake args...]: configures once, then builds everything in DIR.
configure_build() {
  local dir="$1"; shift
  cmake -S "$KAGI_ROOT" -B "$dir" -Wno-dev "$@" >"$dir.configure.log" 2>&1 || {
    cat "$dir.configure.log"; return 1; }
  cmake --build "$dir" -j"$JOBS"
}
