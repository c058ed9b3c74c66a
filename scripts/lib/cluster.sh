# shellcheck shell=bash
# scripts/lib/cluster.sh — `scripts/demo --hosts N`: one kagi site on N "web hosts" on this
# machine, sharing one PostgreSQL for their locks and their data, behind one nginx that spreads
# requests over them round robin. The same layout as docs/DEPLOY.md's two-host example, on one
# box. Source it after common.sh; run_cluster N [kagi-demo args...] runs until Ctrl-C or
# SIGTERM, then stops everything it started (kagi, nginx, PostgreSQL).
#
# What lives where (under var/, kept between runs; delete var/pg and var/cluster to start over):
#   var/pg/                 the PostgreSQL cluster: data/, server.log and its unix socket (the
#                           server listens on no TCP port); role "kagi" owns database "kagi"
#   var/cluster/secret.key  the site's CSRF/session secret, one file for every host (0600)
#   var/cluster/hostK/      host K: locks/ (locks.dir: its status registry and statistics),
#                           data/ (data.dir: empty, as the data is in PostgreSQL and the secret
#                           in secret.key above), kagi.log (its stderr: start-up, access lines)
#   var/cluster/nginx/      nginx.conf, kagi-multihost.conf (conf/nginx/'s recipe with this
#                           machine's ports), access.log (with the host that served each
#                           request), error.log, nginx.pid
#
# Ports: nginx on 127.0.0.1:8080 (every host) and 127.0.0.1:8080+K (host K alone); host K is a
# kagi-demo serving FastCGI on 127.0.0.1:9000+K, in a process group of its own. As root, each
# host also gets a hostname of its own (hostK, in a UTS namespace: unshare), which is how
# /admin/locks tells the hosts apart; otherwise they all show this machine's name.

CLUSTER_DIR="$KAGI_ROOT/var/cluster"
CLUSTER_PG_DIR="$KAGI_ROOT/var/pg"
# Only the number in the socket's name (var/pg/.s.PGSQL.5432): the server listens on no TCP
# port, so it cannot clash with a system PostgreSQL. Keep it fixed: the DSN's host, port and
# database are the lock domain the data records (table kagi_lock_domain), and hosts with another
# one would be refused at start.
CLUSTER_PG_PORT=5432
CLUSTER_HTTP_PORT=8080
CLUSTER_FCGI_BASE=9000
CLUSTER_MAX_HOSTS=9

CLUSTER_KAGI_PIDS=()   # host K's kagi-demo at index K-1 (each leads its process group)
CLUSTER_NGINX_PID=""
CLUSTER_PG_STARTED=0
CLUSTER_PG_BIN=""

# Runs a command as the owner of the PostgreSQL cluster: the caller, or `postgres` when the
# caller is root (initdb and the server refuse to run as root).
pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# psql as the cluster's superuser, on its unix socket.
pg_psql() {
  "$CLUSTER_PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$CLUSTER_PG_DIR" -p "$CLUSTER_PG_PORT" \
    -U postgres -d postgres "$@"
}

# Creates the cluster in var/pg (first run) and starts it; then makes the role and database
# kagi uses, as docs/DEPLOY.md tells a DBA to: a LOGIN role without superuser rights that owns
# its database (and so may create kagi's tables there at the first start).
pg_start() {
  local d
  # The newest server installed, or the one that made the cluster.
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && CLUSTER_PG_BIN="$d"; done
  if [ -f "$CLUSTER_PG_DIR/data/PG_VERSION" ]; then
    CLUSTER_PG_BIN="/usr/lib/postgresql/$(cat "$CLUSTER_PG_DIR/data/PG_VERSION")/bin"
  fi
  if [ ! -x "$CLUSTER_PG_BIN/initdb" ]; then
    echo "no PostgreSQL server binaries in ${CLUSTER_PG_BIN:-/usr/lib/postgresql/*/bin}" \
      "(apt-get install postgresql; var/pg/data was made by PostgreSQL" \
      "$(cat "$CLUSTER_PG_DIR/data/PG_VERSION" 2>/dev/null || echo '-'))" >&2
    return 1
  fi
  mkdir -p "$CLUSTER_PG_DIR"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$CLUSTER_PG_DIR"
    if ! runuser -u postgres -- test -w "$CLUSTER_PG_DIR"; then
      echo "the postgres user cannot write $CLUSTER_PG_DIR: every folder above it must be" \
        "searchable by others (chmod o+x), or move the project out of a private home" >&2
      return 1
    fi
  fi
  if [ ! -f "$CLUSTER_PG_DIR/data/PG_VERSION" ]; then
    log "creating a PostgreSQL cluster in var/pg/"
    pg_as_owner "$CLUSTER_PG_BIN/initdb" -D "$CLUSTER_PG_DIR/data" -U postgres -A trust -E UTF8 \
      --locale=C.UTF-8 >"$CLUSTER_PG_DIR/initdb.log" 2>&1 ||
      { cat "$CLUSTER_PG_DIR/initdb.log" >&2; return 1; }
  fi
  if pg_as_owner "$CLUSTER_PG_BIN/pg_ctl" -D "$CLUSTER_PG_DIR/data" status >/dev/null 2>&1; then
    # An earlier run that was killed outright (SIGKILL) left it running.
    log "PostgreSQL in var/pg/ is running already: using it (it is stopped at the end)"
  else
    log "starting PostgreSQL in var/pg/ (unix socket only)"
    # No TCP port; the socket is for its owner only (root may connect anyway), and trust
    # authentication stays on this machine. max_connections: an idle kagi process holds three
    # connections and its pools grow with the requests holding locks at once (at most
    # locks.postgres.pool + data.postgres.pool + 1), so 300 leaves room for 9 busy hosts.
    pg_as_owner "$CLUSTER_PG_BIN/pg_ctl" -D "$CLUSTER_PG_DIR/data" -l "$CLUSTER_PG_DIR/server.log" \
      -w -t 60 start -o "-k $CLUSTER_PG_DIR -p $CLUSTER_PG_PORT -c listen_addresses='' \
      -c unix_socket_permissions=0700 -c max_connections=300" >/dev/null ||
      { tail -20 "$CLUSTER_PG_DIR/server.log" >&2; return 1; }
  fi
  CLUSTER_PG_STARTED=1
  if [ -z "$(pg_psql -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'kagi'")" ]; then
    pg_psql -c "CREATE ROLE kagi LOGIN"
  fi
  if [ -z "$(pg_psql -tAc "SELECT 1 FROM pg_database WHERE datname = 'kagi'")" ]; then
    pg_psql -c "CREATE DATABASE kagi OWNER kagi"
  fi
}

pg_stop() {
  [ "$CLUSTER_PG_STARTED" -eq 1 ] || return 0
  pg_as_owner "$CLUSTER_PG_BIN/pg_ctl" -D "$CLUSTER_PG_DIR/data" -m fast -w stop >/dev/null ||
    echo "could not stop PostgreSQL in var/pg/: see var/pg/server.log" >&2
  CLUSTER_PG_STARTED=0
}

# The site's one secret (CSRF tokens, the BBS's client tags): 32 random bytes as 64 lowercase
# hex characters, mode 0600. Every host must read the same bytes, or a form one host served is
# refused by the next one: on real hosts, make it once and copy it (docs/DEPLOY.md).
make_shared_secret() {
  local secret="$CLUSTER_DIR/secret.key"
  [ -s "$secret" ] && return 0
  (umask 077 && { od -An -v -N32 -tx1 /dev/urandom | tr -d ' \n'; echo; } >"$secret.new")
  mv "$secret.new" "$secret"
}

# Whether this process may give each host a hostname of its own (root: unshare --uts).
can_name_hosts() {
  [ "$(id -u)" -eq 0 ] && unshare --uts true 2>/dev/null
}

# host_process K [kagi-demo args...]: becomes host K's kagi-demo (exec: same pid), FastCGI on
# 127.0.0.1:9000+K, in a session (and so a process group) of its own: the terminal's Ctrl-C
# reaches only this script, which then stops the hosts in order.
host_process() {
  local k="$1"; shift
  local dir="$CLUSTER_DIR/host$k" name=()
  if can_name_hosts; then
    # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
    name=(unshare --uts sh -c 'hostname "$0" && exec "$@"' "host$k")
  fi
  exec setsid "${name[@]}" "$KAGI_ROOT/build-release/apps/demo/kagi-demo" \
    --fcgi "127.0.0.1:$((CLUSTER_FCGI_BASE + k))" \
    --set locks.backend=postgres --set "locks.postgres.dsn=$CLUSTER_DSN" \
    --set data.backend=postgres \
    --set "locks.dir=$dir/locks" --set "data.dir=$dir/data" \
    --set "security.secret_file=$CLUSTER_DIR/secret.key" \
    --set admin.htpasswd=var/admin.htpasswd "$@" </dev/null >>"$dir/kagi.log" 2>&1
}

# start_host K [kagi-demo args...]: host K in the background; its pid is CLUSTER_KAGI_PIDS[K-1].
start_host() {
  mkdir -p "$CLUSTER_DIR/host$1"
  host_process "$@" &
  CLUSTER_KAGI_PIDS[$1 - 1]=$!
}

# start_nginx N: nginx as a private instance (its own conf, pid, logs and temp folders under
# var/cluster/nginx, like tests/integration/frontends/harness.py), running the shipped
# conf/nginx/kagi-multihost.conf with this machine's ports, plus one server per host.
start_nginx() {
  local n="$1" d="$CLUSTER_DIR/nginx" k servers=""
  mkdir -p "$d"/{body,fastcgi,proxy,uwsgi,scgi}
  cp /etc/nginx/fastcgi_params "$d/fastcgi_params"
  for ((k = 1; k <= n; k++)); do
    servers+="    server 127.0.0.1:$((CLUSTER_FCGI_BASE + k)) max_fails=1 fail_timeout=10s;"$'\n'
  done
  # The recipe's example back ends (the "server 10.0.0.x:9000 ..." lines) become this
  # machine's hosts; its public listen becomes 127.0.0.1:8080.
  awk -v servers="$servers" -v listen="listen 127.0.0.1:$CLUSTER_HTTP_PORT;" '
    /^ *server [0-9.]+:9000 / { if (!done) printf "%s", servers; done = 1; next }
    /^ *listen 80;/ { sub(/listen 80;/, listen) }
    /^ *listen \[::\]:80;/ { next }
    { print }' "$KAGI_ROOT/conf/nginx/kagi-multihost.conf" >"$d/kagi-multihost.conf"
  if ! grep -q "server 127.0.0.1:$((CLUSTER_FCGI_BASE + 1)) " "$d/kagi-multihost.conf" ||
     ! grep -q "listen 127.0.0.1:$CLUSTER_HTTP_PORT;" "$d/kagi-multihost.conf"; then
    echo "conf/nginx/kagi-multihost.conf no longer has the lines scripts/lib/cluster.sh" \
      "replaces (server 10.0.0.x:9000 ..., listen 80;)" >&2
    return 1
  fi
  local direct=""
  for ((k = 1; k <= n; k++)); do
    direct+="
    # Host $k alone, for looking at one host (not the way a site is reached).
    server {
        listen 127.0.0.1:$((CLUSTER_HTTP_PORT + k));
        location / {
            include fastcgi_params;
            fastcgi_param REMOTE_ADDR \$remote_addr;
            fastcgi_pass 127.0.0.1:$((CLUSTER_FCGI_BASE + k));
            fastcgi_buffering off;
            fastcgi_read_timeout 75s;
        }
    }"
  done
  local user=""
  # As root, nginx's workers would otherwise run as nobody, who cannot write the temp
  # folders here. It listens on 127.0.0.1 only.
  [ "$(id -u)" -eq 0 ] && user="user root root;"
  cat >"$d/nginx.conf" <<EOF
# Written by scripts/demo --hosts $n (scripts/lib/cluster.sh) at every start: edit that instead.
$user
worker_processes 1;
daemon off;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 1024; }
http {
    log_format upstream '\$remote_addr [\$time_local] "\$request" \$status '
                        'host=\$upstream_addr \${request_time}s';
    access_log $d/access.log upstream;
    client_body_temp_path $d/body;
    fastcgi_temp_path $d/fastcgi;
    proxy_temp_path $d/proxy;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    include $d/kagi-multihost.conf;
$direct
}
EOF
  # -e stderr: what nginx says before it has read its conf goes to error.log too.
  setsid nginx -e stderr -p "$d" -c "$d/nginx.conf" </dev/null >>"$d/error.log" 2>&1 &
  CLUSTER_NGINX_PID=$!
}

# Whether pid $1 is running (a child that exited but was not waited for yet does not count).
cluster_alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}

# Whether something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_ready WHAT PID LOG PORT: until 127.0.0.1:PORT accepts connections while PID runs; 60 s
# at most. On failure, says why with the end of LOG.
wait_ready() {
  local what="$1" pid="$2" logfile="$3" port="$4" i
  for ((i = 0; i < 600; i++)); do
    if ! cluster_alive "$pid"; then
      echo "$what exited at start; the end of $logfile:" >&2
      tail -15 "$logfile" >&2
      return 1
    fi
    port_open "$port" && return 0
    sleep 0.1
  done
  echo "$what did not listen on 127.0.0.1:$port within 60 s; the end of $logfile:" >&2
  tail -15 "$logfile" >&2
  return 1
}

# Stops everything this run started: nginx first (no new requests), then every host (SIGTERM:
# a kagi process finishes its requests within server.shutdown_timeout_ms, 10 s by default, and
# exits; SIGKILL after 15 s), then PostgreSQL. Runs once, from the EXIT trap.
cluster_stop() {
  trap '' INT TERM
  local pid i groups=()
  [ -n "$CLUSTER_NGINX_PID" ] && groups+=("$CLUSTER_NGINX_PID")
  if [ -n "$CLUSTER_NGINX_PID" ]; then
    kill -TERM "$CLUSTER_NGINX_PID" 2>/dev/null || true
  fi
  for pid in "${CLUSTER_KAGI_PIDS[@]}"; do
    groups+=("$pid")
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  if [ ${#groups[@]} -gt 0 ]; then
    log "stopping nginx and the kagi hosts"
    for ((i = 0; i < 150; i++)); do
      local running=0
      for pid in "${groups[@]}"; do cluster_alive "$pid" && running=1; done
      [ "$running" -eq 0 ] && break
      sleep 0.1
    done
    # Whatever is left of each process group (a stuck process, nginx workers).
    for pid in "${groups[@]}"; do
      kill -KILL -- "-$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
  fi
  if [ "$CLUSTER_PG_STARTED" -eq 1 ]; then
    log "stopping PostgreSQL"
    pg_stop
  fi
}

# Exits (2) unless $1 is a host count run_cluster accepts: from the ports' layout
# (8080 + K, 9000 + K) and PostgreSQL's max_connections, 2 to 9.
check_host_count() {
  if ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 2 ] || [ "$1" -gt "$CLUSTER_MAX_HOSTS" ]; then
    echo "scripts/demo: --hosts wants a number from 2 to $CLUSTER_MAX_HOSTS (got '$1')" >&2
    exit 2
  fi
}

# run_cluster N [kagi-demo args...]: the whole demo, in the foreground until Ctrl-C / SIGTERM.
run_cluster() {
  local n="$1"; shift
  check_host_count "$n"
  trap cluster_stop EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  local k port http_last=$((CLUSTER_HTTP_PORT + n)) fcgi_last=$((CLUSTER_FCGI_BASE + n))
  for port in $(seq "$CLUSTER_HTTP_PORT" "$http_last") $(seq $((CLUSTER_FCGI_BASE + 1)) "$fcgi_last"); do
    if port_open "$port"; then
      echo "127.0.0.1:$port is in use (another scripts/demo?): the demo needs" \
        "$CLUSTER_HTTP_PORT-$http_last and $((CLUSTER_FCGI_BASE + 1))-$fcgi_last" >&2
      return 1
    fi
  done
  mkdir -p "$CLUSTER_DIR"
  pg_start
  CLUSTER_DSN="host=$CLUSTER_PG_DIR port=$CLUSTER_PG_PORT dbname=kagi user=kagi"
  make_shared_secret
  log "starting $n kagi hosts (logs: var/cluster/hostK/kagi.log)"
  for ((k = 1; k <= n; k++)); do start_host "$k" "$@"; done
  start_nginx "$n"
  for ((k = 1; k <= n; k++)); do
    wait_ready "host $k" "${CLUSTER_KAGI_PIDS[k - 1]}" "var/cluster/host$k/kagi.log" \
      "$((CLUSTER_FCGI_BASE + k))"
  done
  wait_ready nginx "$CLUSTER_NGINX_PID" var/cluster/nginx/error.log "$CLUSTER_HTTP_PORT"
  # Every host through nginx once: a host that cannot serve shows here, not at the first visit.
  for ((k = 1; k <= n; k++)); do
    if ! curl -sf -o /dev/null --max-time 10 \
         "http://127.0.0.1:$((CLUSTER_HTTP_PORT + k))/bbs/"; then
      echo "host $k does not serve /bbs/; see var/cluster/host$k/kagi.log" >&2
      return 1
    fi
  done

  log "kagi demo on $n hosts: http://127.0.0.1:$CLUSTER_HTTP_PORT/  (round robin; Ctrl-C to stop)"
  echo "admin pages: user admin, password $(cat var/admin.password)  (var/admin.password)"
  for ((k = 1; k <= n; k++)); do
    echo "host $k alone: http://127.0.0.1:$((CLUSTER_HTTP_PORT + k))/" \
      " (FastCGI 127.0.0.1:$((CLUSTER_FCGI_BASE + k)), var/cluster/host$k/)"
  done
  echo "which host served what: var/cluster/nginx/access.log (host=127.0.0.1:900K)"
  echo "locks and data: PostgreSQL, $CLUSTER_DSN"
  echo "  (psql \"$CLUSTER_DSN\"; the site's secret: var/cluster/secret.key)"
  can_name_hosts ||
    echo "(every host shows this machine's name in /admin/locks: naming them needs root)"

  # Until a signal: a host that exits is reported and the others go on serving (nginx skips
  # it), which is the failure a multi-host site is for; nginx exiting ends the demo.
  local live=("${CLUSTER_KAGI_PIDS[@]}" "$CLUSTER_NGINX_PID") done_pid status
  while [ ${#live[@]} -gt 1 ]; do
    done_pid="" status=0
    wait -n -p done_pid "${live[@]}" || status=$?
    [ -n "$done_pid" ] || break  # nothing left to wait for (status 127)
    if [ "$done_pid" = "$CLUSTER_NGINX_PID" ]; then
      echo "nginx exited (status $status); see var/cluster/nginx/error.log" >&2
      return 1
    fi
    for ((k = 1; k <= n; k++)); do
      if [ "${CLUSTER_KAGI_PIDS[k - 1]}" = "$done_pid" ]; then
        echo "host $k exited (status $status; see var/cluster/host$k/kagi.log):" \
          "nginx sends its requests to the other hosts" >&2
      fi
    done
    local rest=() pid
    for pid in "${live[@]}"; do [ "$pid" = "$done_pid" ] || rest+=("$pid"); done
    live=("${rest[@]}")
  done
  echo "every host exited; stopping" >&2
  return 1
}
