#!/usr/bin/env bash
# services.sh start|stop|status|env — the local ZooKeeper and PostgreSQL that the quickstart and
# the test suite use. Installs what is missing (Debian packages), runs both on loopback with
# their data under .run/ (ignored by git), and is idempotent: a service already up is reused.
#
#   ZKSCHED_ZK_PORT  ZooKeeper client port (default 2181)
#   ZKSCHED_PG_PORT  PostgreSQL port (default 5432)
#   ZKSCHED_RUN_DIR  where their data lives (default .run/ of this checkout)
#
# PostgreSQL's role zksched is no superuser: it owns its database zksched and logs in with a
# generated password kept in $ZKSCHED_RUN_DIR/zksched-db-password (mode 0600), which `env`
# puts in ZKSCHED_DB_DSN. The superuser postgres logs in only over the unix socket, as the
# system user that runs the server (peer): a local account or a task cannot reach it over TCP.
# A cluster made by an older services.sh (zksched a superuser, trust for everyone) is
# converted by the next start.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
run="${ZKSCHED_RUN_DIR:-$top/.run}"
zk_port="${ZKSCHED_ZK_PORT:-2181}"
pg_port="${ZKSCHED_PG_PORT:-5432}"
zk_dir="$run/zookeeper"
pg_dir="$run/postgres"
pw_file="$run/zksched-db-password"
pg_bin=/usr/lib/postgresql/15/bin

log() { printf 'services: %s\n' "$*" >&2; }

zk_ok() { [ "$( (exec 3<>/dev/tcp/127.0.0.1/"$zk_port" && printf ruok >&3 && timeout 2 cat <&3) 2>/dev/null)" = imok ]; }
pg_ok() { "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" 2>/dev/null; }

apt_updated=
need_pkg() { # need_pkg FILE PACKAGE: installs PACKAGE unless FILE exists
  [ -e "$1" ] && return 0
  if [ "$(id -u)" != 0 ]; then log "$2 is missing and only root can install it"; exit 1; fi
  if [ -z "$apt_updated" ]; then log "apt-get update"; apt-get update -qq >/dev/null; apt_updated=1; fi
  log "installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

start_zk() {
  if zk_ok; then log "zookeeper up on 127.0.0.1:$zk_port"; return; fi
  need_pkg /usr/share/java/zookeeper.jar zookeeper
  command -v java >/dev/null || need_pkg /usr/bin/java default-jre-headless
  mkdir -p "$zk_dir/data"
  # tickTime 500 ms with minSessionTimeout 1 s lets tests use short sessions; a production
  # ensemble keeps the defaults. Of the four-letter words only srvr (zksched's server mode),
  # ruok and mntr (health checks): the others (cons, dump, wchc…) tell any local account the
  # sessions and paths of every client. zksched's conf check has nothing to say of a
  # standalone server and is skipped. No admin server on 8080.
  cat > "$zk_dir/zoo.cfg" <<CFG
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$zk_dir/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
maxClientCnxns=0
4lw.commands.whitelist=srvr,ruok,mntr
admin.enableServer=false
CFG
  cat > "$zk_dir/log4j.properties" <<'CFG'
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=${zookeeper.log.file}
log4j.appender.FILE.MaxFileSize=16MB
log4j.appender.FILE.MaxBackupIndex=2
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
CFG
  log "starting zookeeper on 127.0.0.1:$zk_port (data in $zk_dir)"
  ( cd "$zk_dir" && exec setsid java -Xmx512m \
      -Dzookeeper.log.file="$zk_dir/zookeeper.log" -Dlog4j.configuration="file:$zk_dir/log4j.properties" \
      -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$zk_dir/zoo.cfg" \
      >"$zk_dir/stdout.log" 2>&1 </dev/null & echo $! > "$zk_dir/pid" )
  for _ in $(seq 1 120); do zk_ok && { log "zookeeper up"; return; }; sleep 0.25; done
  log "zookeeper did not start; see $zk_dir/zookeeper.log"; tail -20 "$zk_dir/zookeeper.log" >&2 || true; exit 1
}

as_pg() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }

# PostgreSQL runs as the postgres user, which must be able to reach its data directory. A
# checkout under a private folder (/root, a mktemp -d) is not reachable: then the data lives in
# /var/tmp/zksched-<hash of this checkout> and .run/postgres links to it.
pg_locate() {
  [ "$(id -u)" = 0 ] || return 0
  mkdir -p "$run"
  [ -L "$pg_dir" ] && pg_dir=$(readlink "$pg_dir") && return 0
  if ! runuser -u postgres -- test -x "$run" 2>/dev/null; then
    local alt
    alt="/var/tmp/zksched-$(printf %s "$top" | md5sum | cut -c1-12)"
    mkdir -p "$alt/postgres"
    chmod 711 "$alt"
    if [ -d "$pg_dir" ] && [ ! -L "$pg_dir" ]; then rm -rf "$pg_dir"; fi
    ln -sfn "$alt/postgres" "$pg_dir"
    log "postgres cannot reach $run; keeping its data in $alt/postgres (linked from $pg_dir)"
    pg_dir="$alt/postgres"
  fi
}

# Huge pages for PostgreSQL's shared memory, its documented setup for a large shared_buffers:
# on this project's 2-vCPU virtual machine a burn-down costs 10-40 % less CPU a workflow with
# them (docs/performance.md, Tuning), the page-table work of 4 kB pages over 256 MB of buffers being
# what a VM makes dear. Reserved only as root where the kernel allows it, on top of what
# others reserved, and given back by stop; ZKSCHED_HUGE_PAGES=0 skips it. PostgreSQL's
# default huge_pages = try falls back to normal pages when none are free.
pg_huge_pages_reserve() {
  [ "${ZKSCHED_HUGE_PAGES:-1}" != 0 ] && [ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/nr_hugepages ] || return 0
  local need total free rsvd avail
  need=$(as_pg "$pg_bin/postgres" -D "$pg_dir/data" -C shared_memory_size_in_huge_pages 2>/dev/null) || return 0
  [ "${need:-0}" -gt 0 ] 2>/dev/null || return 0
  total=$(cat /proc/sys/vm/nr_hugepages)
  free=$(awk '/^HugePages_Free/ {print $2}' /proc/meminfo)
  rsvd=$(awk '/^HugePages_Rsvd/ {print $2}' /proc/meminfo)
  avail=$((free - rsvd))
  [ "$avail" -ge "$need" ] && return 0
  echo $((total + need - avail)) > /proc/sys/vm/nr_hugepages 2>/dev/null || return 0
  local got=$(( $(cat /proc/sys/vm/nr_hugepages) - total ))
  if [ "$got" -gt 0 ]; then
    echo "$got" > "$pg_dir/hugepages"
    log "reserved $got huge pages for postgresql's shared memory (ZKSCHED_HUGE_PAGES=0 to skip)"
  fi
}
pg_huge_pages_release() {
  [ -f "$pg_dir/hugepages" ] && [ -w /proc/sys/vm/nr_hugepages ] || return 0
  local added total
  added=$(cat "$pg_dir/hugepages"); total=$(cat /proc/sys/vm/nr_hugepages)
  echo $(( total > added ? total - added : 0 )) > /proc/sys/vm/nr_hugepages 2>/dev/null || true
  rm -f "$pg_dir/hugepages"
}

# pg_owner is the system user the server runs as: the one allowed to log in as postgres.
pg_owner() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

# pg_auth writes pg_hba.conf and pg_ident.conf (as the server's user, who owns them): no trust
# anywhere, postgres only over the unix socket as the server's system user, every other role
# with its password. It says whether they changed, so that a running server reloads them.
pg_auth() {
  local hba ident changed=1
  hba="# Written by bin/services.sh; it rewrites this file at every start.
# The superuser only over the unix socket, as the system user that runs the server.
local  all  postgres                 peer map=owner
host   all  postgres  0.0.0.0/0     reject
host   all  postgres  ::/0          reject
# Everyone else (zksched) with a password.
local  all  all                      scram-sha-256
host   all  all       127.0.0.1/32  scram-sha-256
host   all  all       ::1/128       scram-sha-256"
  ident="# Written by bin/services.sh: the system user $(pg_owner) may log in as postgres.
owner  $(pg_owner)  postgres"
  if [ "$(as_pg cat "$pg_dir/data/pg_hba.conf")" != "$hba" ] || [ "$(as_pg cat "$pg_dir/data/pg_ident.conf")" != "$ident" ]; then
    printf '%s\n' "$hba" | as_pg tee "$pg_dir/data/pg_hba.conf" >/dev/null
    printf '%s\n' "$ident" | as_pg tee "$pg_dir/data/pg_ident.conf" >/dev/null
    log "postgresql: no trust; postgres by peer over the socket only, zksched by password"
    changed=0
  fi
  return $changed
}

# psql_pg runs psql as postgres over the unix socket the server was configured with.
psql_pg() {
  local sock
  sock=$(sed -n "s/^unix_socket_directories = '\(.*\)'/\1/p" "$pg_dir/data/postgresql.conf" | tail -1)
  as_pg psql -X -q -v ON_ERROR_STOP=1 -h "${sock:-$pg_dir}" -p "$pg_port" -U postgres "$@"
}

# pg_role makes the role zksched what it must be, whatever an older services.sh made it: no
# superuser nor any other power over the server, the owner of its database, logging in with
# the password of $pw_file (made here once). pg_stat_statements, for profiling, is created in
# its database, with its reset granted to zksched.
pg_role() {
  if [ ! -s "$pw_file" ]; then
    (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > "$pw_file")
    log "generated zksched's database password in $pw_file"
  fi
  chmod 600 "$pw_file"
  # The password goes on psql's standard input, never on a command line others can read.
  psql_pg -d postgres <<SQL
SELECT 'CREATE ROLE zksched LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'zksched') \gexec
SET password_encryption = 'scram-sha-256';
ALTER ROLE zksched LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '$(cat "$pw_file")';
SELECT 'CREATE DATABASE zksched OWNER zksched' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'zksched') \gexec
ALTER DATABASE zksched OWNER TO zksched;
SQL
  psql_pg -d zksched <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
GRANT EXECUTE ON FUNCTION pg_stat_statements_reset TO zksched;
SQL
}

# pg_ours says whether the server on $pg_port runs from this run folder's data directory.
pg_ours() {
  [ -f "$pg_dir/data/postmaster.pid" ] && [ "$(sed -n 4p "$pg_dir/data/postmaster.pid")" = "$pg_port" ]
}

start_pg() {
  if pg_ok; then
    [ -L "$pg_dir" ] && pg_dir=$(readlink "$pg_dir")
    if ! pg_ours; then
      log "postgresql up on 127.0.0.1:$pg_port, not from $pg_dir: its roles are left as they are"
      return
    fi
    if pg_auth; then psql_pg -d postgres -tAc "SELECT pg_reload_conf()" >/dev/null; fi
    pg_role
    log "postgresql up on 127.0.0.1:$pg_port"
    return
  fi
  need_pkg "$pg_bin/postgres" postgresql-15
  pg_locate
  mkdir -p "$pg_dir"
  # PostgreSQL refuses to run as root: the cluster belongs to the postgres user.
  [ "$(id -u)" = 0 ] && chown postgres: "$pg_dir" && chmod 700 "$pg_dir"
  if [ ! -f "$pg_dir/data/PG_VERSION" ]; then
    log "initdb $pg_dir/data"
    as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --no-locale >/dev/null
    cat >> "$pg_dir/data/postgresql.conf" <<CFG
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_dir'
max_connections = 400
shared_buffers = 256MB
fsync = on
CFG
  fi
  # pg_stat_statements is how the benchmark's statements are profiled, and autovacuum looks
  # every 2 s so that claims do not read past dead queue entries for a minute (see
  # docs/performance.md, Tuning, and sql/migrations/00005_queue_autovacuum.sql).
  grep -q '^shared_preload_libraries' "$pg_dir/data/postgresql.conf" ||
    echo "shared_preload_libraries = 'pg_stat_statements'" >> "$pg_dir/data/postgresql.conf"
  grep -q '^autovacuum_naptime' "$pg_dir/data/postgresql.conf" ||
    echo "autovacuum_naptime = 2s" >> "$pg_dir/data/postgresql.conf"
  pg_auth || true
  pg_huge_pages_reserve
  log "starting postgresql on 127.0.0.1:$pg_port (data in $pg_dir/data)"
  as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/postgres.log" -o "-p $pg_port" -w -t 60 start >/dev/null
  pg_role
  log "postgresql up"
}

stop_zk() {
  if [ -f "$zk_dir/pid" ] && kill -0 "$(cat "$zk_dir/pid")" 2>/dev/null; then
    kill "$(cat "$zk_dir/pid")"; log "zookeeper stopped"
  fi
  rm -f "$zk_dir/pid"
}
stop_pg() {
  [ -L "$pg_dir" ] && pg_dir=$(readlink "$pg_dir")
  if [ -f "$pg_dir/data/postmaster.pid" ]; then
    as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop >/dev/null && log "postgresql stopped"
  fi
  pg_huge_pages_release
}

case "${1:-}" in
  start) start_zk; start_pg ;;
  stop) stop_zk; stop_pg ;;
  status)
    zk_ok && echo "zookeeper: up on 127.0.0.1:$zk_port" || echo "zookeeper: down"
    pg_ok && echo "postgresql: up on 127.0.0.1:$pg_port" || echo "postgresql: down" ;;
  env)
    echo "ZKSCHED_REGISTRY_SERVERS=127.0.0.1:$zk_port"
    if [ ! -r "$pw_file" ]; then log "no database password in $pw_file: run $0 start first"; exit 1; fi
    echo "ZKSCHED_DB_DSN=postgres://zksched:$(cat "$pw_file")@127.0.0.1:$pg_port/zksched?sslmode=disable" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
