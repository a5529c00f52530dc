#!/usr/bin/env bash
# cluster.sh up|down|status|env|... — three simulated hosts on this machine, as production runs
# zksched: each host is a Linux network namespace joined to the others by a bridge, with its
# own address, and runs a ZooKeeper server (together a 3-server ensemble), a PostgreSQL node
# under Patroni (its leader lock in that ensemble, synchronous_mode on, so a promoted standby
# has every committed transaction), HAProxy in front of PostgreSQL (to whichever node
# Patroni's REST API calls primary), a master and a worker. Traffic stays on the namespaces'
# own addresses and the bridge's. Needs root; installs what is missing (Debian packages);
# state lives under .run/cluster/ (ignored by git).
#
#   up            build, start everything, migrate, start the nodes; idempotent
#   net           only the namespaces, links and bridge (up makes them too), so that a
#                 service can listen on the bridge's address before the hosts start
#   down          stop every process, delete the namespaces, the bridge and the state
#   status        each host's processes, the ensemble's modes, Patroni's view
#   env           the ZKSCHED_* variables that point zksched commands at the cluster
#   kill HOST     kill -9 every process of one host (HOST: 1, 2 or 3)
#   start HOST    start what is not running on one host (after kill)
#   cut HOST      take the host's link down: it is cut off from the others and from this one
#   heal HOST     bring its link up again
#   netem HOST ARGS...   tc netem on the host's link (e.g. delay 100ms loss 5%); `netem HOST off`
#                        (needs the kernel's sch_netem: some VM kernels lack it, then use shape)
#   shape HOST RATE LATENCY   a slow link (tc tbf): RATE (e.g. 512kbit) both ways, packets
#                        queued up to LATENCY (e.g. 200ms) and dropped beyond; `shape HOST off`
#   loss HOST PERCENT    drop PERCENT (e.g. 5%) of the packets to and from the host at random
#                        (nftables, no netem needed); `loss HOST off`
#   stop-node HOST master|worker|zookeeper|patroni|haproxy   kill -9 one process; a master
#                        or worker is started again 3 s later by its supervisor, as the
#                        deploy/ units' Restart=on-failure would (a fenced one too)
#   switchover [HOST]    a planned switchover (patronictl): the primary hands over to the
#                        synchronous standby (or to HOST's node) and becomes a standby
#   exec HOST CMD...     run a command inside the host's namespace
#
#   ZKSCHED_CLUSTER_NET   the /24 prefix of the hosts' addresses (default 10.77.0): host N is
#                         PREFIX.N, the bridge PREFIX.254
#   ZKSCHED_CLUSTER_NAME  prefix of the namespaces and links (default zks)
#   ZKSCHED_RUN_DIR       the state goes in its cluster/ folder (default .run)
#   ZKSCHED_BIN           the zksched binary to run (default: bin/zksched, built by up)
#
# The hosts' configuration files are the example deployment's (deploy/etc, rendered by
# deploy/render.sh) with the simulated addresses and shorter timeouts.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
net="${ZKSCHED_CLUSTER_NET:-10.77.0}"
name="${ZKSCHED_CLUSTER_NAME:-zks}"
dir="${ZKSCHED_RUN_DIR:-$top/.run}/cluster"
link="$dir" # where the state is found; locate sets dir to where it is kept
bridge="${name}br0"
hosts=(1 2 3)
bin="${ZKSCHED_BIN:-$top/bin/zksched}"
pg_bin=/usr/lib/postgresql/15/bin
zk_cp=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
zk_port=2181 pg_port=5432 rest_port=8008 ha_port=5000 master_port=5678 worker_port=5679

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

ns() { echo "${name}-h$1"; }
addr() { echo "$net.$1"; }
in_ns() { local h=$1; shift; ip netns exec "$(ns "$h")" "$@"; }
zk_servers() { local s=() h; for h in "${hosts[@]}"; do s+=("$(addr "$h"):$zk_port"); done; (IFS=,; echo "${s[*]}"); }
hdir() { echo "$dir/h$1"; }
patroni_urls() { local s=() h; for h in "${hosts[@]}"; do s+=("http://$(addr "$h"):$rest_port"); done; (IFS=,; echo "${s[*]}"); }

apt_updated=
need_pkg() { # need_pkg FILE PACKAGE...: installs the packages unless FILE exists
  local file=$1; shift
  [ -e "$file" ] && return 0
  [ "$(id -u)" = 0 ] || die "$* missing and only root can install it"
  if [ -z "$apt_updated" ]; then log "apt-get update"; apt-get update -qq >/dev/null; apt_updated=1; fi
  log "installing $*"
  # Debian's packages would start their own services; policy-rc.d keeps them down: the
  # cluster runs its own, in the namespaces.
  local policy=/usr/sbin/policy-rc.d had=
  [ -e "$policy" ] && had=1
  [ -n "$had" ] || { printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  [ -n "$had" ] || rm -f "$policy"
}

# The state lives where the postgres user can reach it: under .run/ when it can traverse the
# checkout, else in /var/tmp/zksched-cluster-<hash>, linked from .run/cluster.
locate() {
  mkdir -p "$(dirname "$dir")"
  if [ -L "$dir" ]; then dir=$(readlink "$dir"); return; fi
  [ -d "$dir" ] && return
  if runuser -u postgres -- test -x "$(dirname "$dir")" 2>/dev/null; then mkdir -p "$dir"; chmod 711 "$dir"; return; fi
  local alt
  alt="/var/tmp/zksched-cluster-$(printf %s "$dir" | md5sum | cut -c1-12)"
  mkdir -p "$alt"; chmod 711 "$alt"
  ln -sfn "$alt" "$dir"
  dir=$alt
}

secret() { # secret NAME: a random password kept in the state folder
  local f="$dir/secrets/$1"
  if [ ! -s "$f" ]; then mkdir -p "$dir/secrets"; chmod 711 "$dir/secrets"; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$f"; chmod 644 "$f"; fi
  cat "$f"
}

# --- the network ---------------------------------------------------------------------------

net_up() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$(addr 254)/24" dev "$bridge"
  fi
  ip link set "$bridge" up
  local h
  for h in "${hosts[@]}"; do
    ip netns list | grep -qw "$(ns "$h")" || ip netns add "$(ns "$h")"
    if ! ip link show "$(ns "$h")" >/dev/null 2>&1; then
      ip link add "$(ns "$h")" type veth peer name eth0 netns "$(ns "$h")"
      ip link set "$(ns "$h")" master "$bridge"
      in_ns "$h" ip addr add "$(addr "$h")/24" dev eth0
    fi
    ip link set "$(ns "$h")" up
    in_ns "$h" ip link set lo up
    in_ns "$h" ip link set eth0 up
  done
}

loss_table() { echo "${name}_loss_h$1"; }

net_down() {
  local h
  for h in "${hosts[@]}"; do
    command -v nft >/dev/null && nft delete table netdev "$(loss_table "$h")" 2>/dev/null || true
    ip link del "$(ns "$h")" 2>/dev/null || true
    ip netns del "$(ns "$h")" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
}

# --- processes -----------------------------------------------------------------------------

# spawn HOST NAME CMD...: starts CMD in the host's namespace, detached, its output in
# h<N>/<NAME>.log and its pid in h<N>/<NAME>.pid.
spawn() {
  local h=$1 what=$2; shift 2
  local d; d=$(hdir "$h")
  # In the host's folder: the processes that run as postgres cannot use a working directory
  # they may not enter (a checkout in a private folder), and initdb refuses to start there.
  (cd "$d" && exec ip netns exec "$(ns "$h")" setsid "$@") >>"$d/$what.log" 2>&1 </dev/null &
  echo $! > "$d/$what.pid"
}

# spawn_supervised HOST NAME CMD...: spawn, with CMD started again 3 s after it exits, as the
# deploy/ units' Restart=on-failure (RestartSec=3s, RestartPreventExitStatus=2) do: a node
# killed or fenced (exit 75) comes back as a new identity; one that stopped cleanly (0) or
# has a bad config (2) stays down. The pid file holds the supervising shell's pid.
spawn_supervised() {
  local h=$1 what=$2; shift 2
  spawn "$h" "$what" bash -c 'while :; do "$@"; rc=$?
    case $rc in 0|2) printf "cluster: %s exited with %s; not started again\n" "$0" "$rc" >&2; exit "$rc";; esac
    printf "cluster: %s exited with %s; starting it again in 3 s\n" "$0" "$rc" >&2; sleep 3; done' "$what" "$@"
}

running() { # running HOST NAME
  local f; f="$(hdir "$1")/$2.pid"
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

wait_for() { # wait_for SECONDS WHAT CMD...
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || { log "timed out waiting for $what"; return 1; }
    sleep 0.3
  done
}

zk_srvr() { # zk_srvr HOST: the server's mode (leader, follower, standalone) or nothing
  (exec 3<>"/dev/tcp/$(addr "$1")/$zk_port" && printf srvr >&3 && timeout 2 cat <&3) 2>/dev/null | awk '/^Mode:/ {print $2}'
}

# render HOST: the host's configuration files, from the example deployment's templates
# (deploy/render.sh) with the simulated hosts' addresses, folders and shorter timeouts, so
# that a fault is over in seconds: ZooKeeper ticks of 500 ms, Patroni's leader lock lapsing
# after 10 s, the nodes' sessions of 5 s (2 × syncLimit × tickTime).
render() {
  local h=$1
  HOST1=$(addr 1) HOST2=$(addr 2) HOST3=$(addr 3) NETWORK="$net.0/24" \
  ZK_DATA="$(hdir "$h")/zookeeper/data" PATRONI_DIR="$(hdir "$h")/patroni" PG_BIN="$pg_bin" \
  ZK_TICK_MS=500 ZK_MIN_SESSION_MS=1000 PATRONI_TTL=10 PATRONI_LOOP_WAIT=2 PATRONI_RETRY_TIMEOUT=4 \
  ZKSCHED_SESSION_TIMEOUT=5s \
  PG_SUPERUSER_PASSWORD=$(secret postgres) PG_REPLICATION_PASSWORD=$(secret replicator) \
  ZKSCHED_DB_PASSWORD=$(secret zksched) API_TOKEN_FILE="$dir/secrets/api-token" \
    "$top/deploy/render.sh" "$h" "$(hdir "$h")"
}

start_zk() {
  local h=$1 d; d="$(hdir "$h")/zookeeper"
  running "$h" zookeeper && return
  mkdir -p "$d/data"
  echo "$h" > "$d/data/myid"
  cat > "$d/log4j.properties" <<'CFG'
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=${zookeeper.log.file}
log4j.appender.FILE.MaxFileSize=16MB
log4j.appender.FILE.MaxBackupIndex=2
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
CFG
  spawn "$h" zookeeper java -Xmx256m -Dzookeeper.log.file="$d/zookeeper.log" \
    -Dlog4j.configuration="file:$d/log4j.properties" -cp "$zk_cp" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$(hdir "$h")/etc/zookeeper/zoo.cfg"
}

start_patroni() {
  local h=$1 d; d="$(hdir "$h")/patroni"
  running "$h" patroni && return
  mkdir -p "$d"
  chown postgres: "$d"; chmod 700 "$d"
  chown postgres: "$(hdir "$h")/etc/patroni/config.yml"
  touch "$(hdir "$h")/patroni.log"; chown postgres: "$(hdir "$h")/patroni.log"
  spawn "$h" patroni setpriv --reuid=postgres --regid=postgres --init-groups patroni "$(hdir "$h")/etc/patroni/config.yml"
}

start_haproxy() {
  local h=$1
  running "$h" haproxy && return
  spawn "$h" haproxy haproxy -db -f "$(hdir "$h")/etc/haproxy/haproxy.cfg"
}

start_nodes() {
  local h=$1 cfg; cfg="$(hdir "$h")/etc/zksched/zksched.yaml"
  running "$h" master || spawn_supervised "$h" master "$bin" master --config "$cfg"
  # The hosts' tasks are the tests' own recorded commands, run as root like the rest of this
  # simulation; a real host gives its worker a worker.task-user instead.
  running "$h" worker || spawn_supervised "$h" worker env ZKSCHED_WORKER_ALLOW_ROOT_TASKS=true "$bin" worker --config "$cfg"
}

start_host() {
  local h=$1
  mkdir -p "$(hdir "$h")"
  render "$h"
  start_zk "$h"; start_patroni "$h"; start_haproxy "$h"
  [ -x "$bin" ] && [ -f "$dir/migrated" ] && start_nodes "$h"
  return 0
}

primary() { # the host number of the PostgreSQL primary, by Patroni's REST API
  local h
  for h in "${hosts[@]}"; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$(addr "$h"):$rest_port/primary")" = 200 ] && { echo "$h"; return 0; }
  done
  return 1
}

sync_standby() { # true when Patroni names a synchronous standby
  curl -s --max-time 1 "http://$(addr "$(primary)"):$rest_port/cluster" | grep -q '"role": *"sync_standby"'
}

ensemble_whole() {
  local h m leaders=0 followers=0
  for h in "${hosts[@]}"; do
    m=$(zk_srvr "$h")
    case "$m" in leader) leaders=$((leaders + 1));; follower) followers=$((followers + 1));; esac
  done
  [ "$leaders" = 1 ] && [ "$followers" = $((${#hosts[@]} - 1)) ]
}

kill_host() { # kill -9 every process in the host's namespace
  local h=$1 pids i
  # Again until none is left: a supervisor may have started a node between the listing and
  # its own death. Processes outside the namespace that belong to it: none.
  for i in $(seq 40); do
    pids=$(ip netns pids "$(ns "$h")" 2>/dev/null || true)
    [ -n "$pids" ] || break
    kill -9 $pids 2>/dev/null || true
    sleep 0.25
  done
  rm -f "$(hdir "$h")"/*.pid
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
  command -v ip >/dev/null || need_pkg /usr/sbin/ip iproute2
  need_pkg /usr/share/java/zookeeper.jar zookeeper
  command -v java >/dev/null || need_pkg /usr/bin/java default-jre-headless
  need_pkg "$pg_bin/postgres" postgresql-15
  need_pkg /usr/bin/patroni patroni python3-kazoo
  /usr/bin/python3 -c 'import kazoo' 2>/dev/null || need_pkg /nonexistent python3-kazoo
  need_pkg /usr/sbin/haproxy haproxy
  command -v curl >/dev/null || need_pkg /usr/bin/curl curl
  locate
  net_up
  local h
  secret api-token >/dev/null
  chmod 600 "$dir/secrets/api-token" # whoever reads it is an admin: the masters refuse it otherwise
  for h in "${hosts[@]}"; do mkdir -p "$(hdir "$h")"; render "$h"; start_zk "$h"; done
  log "waiting for the ZooKeeper ensemble on $(zk_servers)"
  wait_for 90 "a ZooKeeper leader and two followers" ensemble_whole
  for h in "${hosts[@]}"; do start_patroni "$h"; done
  log "waiting for Patroni to elect a primary and a synchronous standby"
  wait_for 180 "a PostgreSQL primary" primary
  wait_for 180 "a synchronous standby" sync_standby
  for h in "${hosts[@]}"; do start_haproxy "$h"; done
  local p; p=$(primary)
  wait_for 30 "HAProxy to route to the primary" in_ns 1 "$pg_bin/pg_isready" -q -h "$(addr 1)" -p "$ha_port"
  PGPASSWORD=$(secret postgres) "$pg_bin/psql" -q -v ON_ERROR_STOP=1 -h "$(addr "$p")" -p "$pg_port" -U postgres -d postgres <<SQL >/dev/null
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'zksched') THEN
    CREATE ROLE zksched LOGIN PASSWORD '$(secret zksched)';
  END IF;
END \$\$;
-- zk nodes reads the standbys' addresses from pg_stat_replication when Patroni's API is not
-- configured; without this role the view hides them from a non-superuser.
GRANT pg_read_all_stats TO zksched;
SELECT NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'zksched') AS missing \gset
\if :missing
CREATE DATABASE zksched OWNER zksched;
\endif
SQL
  if [ -z "${ZKSCHED_BIN:-}" ]; then
    log "building bin/zksched"
    (cd "$top" && PATH="$PATH:/usr/local/go/bin" go build -o "$bin" ./cmd/zksched)
  fi
  # A cluster just bootstrapped may still move its primary or cut HAProxy's sessions once:
  # migrations are safe to run again (each in its own transaction, under a lock), so a run
  # cut short is tried again.
  local try out
  for try in 1 2 3 4 5; do
    out=$("$bin" migrate --config "$(hdir 1)/etc/zksched/zksched.yaml" 2>&1) && break
    [ "$try" -lt 5 ] || die "zksched migrate failed: $out"
    log "zksched migrate failed (${out##*: }); trying again in 2 s"
    sleep 2
  done
  touch "$dir/migrated"
  for h in "${hosts[@]}"; do start_nodes "$h"; done
  for h in "${hosts[@]}"; do
    wait_for 60 "the master of host $h" curl -sf --max-time 1 "http://$(addr "$h"):$master_port/readyz"
  done
  log "up: masters at http://$(addr 1):$master_port/ (and .2, .3); token in $dir/secrets/api-token"
  log "point zksched at it: eval \"\$(bin/cluster.sh env | sed 's/^/export /')\""
}

down() {
  local h
  for h in "${hosts[@]}"; do
    ip netns list 2>/dev/null | grep -qw "$(ns "$h")" && kill_host "$h"
  done
  net_down
  rm -rf "$dir"
  [ -L "$link" ] && rm -f "$link"
  log "down: no process, namespace, link or state left"
}

status() {
  local h w m
  for h in "${hosts[@]}"; do
    printf 'host %s (%s, namespace %s)\n' "$h" "$(addr "$h")" "$(ns "$h")"
    for w in zookeeper patroni haproxy master worker; do
      if running "$h" "$w"; then printf '  %-10s pid %s\n' "$w" "$(cat "$(hdir "$h")/$w.pid")"; else printf '  %-10s down\n' "$w"; fi
    done
    m=$(zk_srvr "$h"); printf '  zookeeper mode: %s\n' "${m:-unreachable}"
  done
  local p; p=$(primary || true)
  printf 'postgresql primary: %s\n' "${p:+host $p ($(addr "$p"):$pg_port)}"
  [ -n "$p" ] && curl -s --max-time 2 "http://$(addr "$p"):$rest_port/cluster" && echo
  return 0
}

env_vars() {
  locate
  local hs=() h
  for h in "${hosts[@]}"; do hs+=("$(addr "$h")"); done
  # Quoted, for eval: the DSN holds an & and the token may hold anything.
  printf "ZKSCHED_REGISTRY_SERVERS='%s'\n" "$(zk_servers)"
  # lib/pq takes several hosts and tries them in turn; each is a host's HAProxy, so the
  # commands reach the primary while one host is down.
  printf "ZKSCHED_DB_DSN='%s'\n" "host=$(IFS=,; echo "${hs[*]}") port=$ha_port user=zksched password=$(secret zksched) dbname=zksched sslmode=disable connect_timeout=3"
  printf "ZKSCHED_DB_PATRONI_URLS='%s'\n" "$(patroni_urls)"
  printf "ZKSCHED_SERVER='%s'\n" "http://$(addr 1):$master_port"
  printf "ZKSCHED_TOKEN='%s'\n" "$(secret api-token)"
}

link_off() { # link_off HOST: the host's link without netem or shaping
  tc qdisc del dev "$(ns "$1")" root 2>/dev/null || true
  in_ns "$1" tc qdisc del dev eth0 root 2>/dev/null || true
}

host_arg() { case "${1:-}" in 1|2|3) ;; *) die "want a host: 1, 2 or 3";; esac; }

cmd="${1:-}"; shift || true
case "$cmd" in
  up) up ;;
  net) [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"; net_up ;;
  down) locate 2>/dev/null || true; down ;;
  status) locate; status ;;
  env) env_vars ;;
  kill) host_arg "${1:-}"; locate; kill_host "$1" ;;
  start) host_arg "${1:-}"; locate; start_host "$1" ;;
  cut) host_arg "${1:-}"; ip link set "$(ns "$1")" down ;;
  heal) host_arg "${1:-}"; ip link set "$(ns "$1")" up ;;
  netem)
    host_arg "${1:-}"; h=$1; shift
    # Both ends of the host's link, so that both directions suffer.
    if [ "${1:-}" = off ]; then
      link_off "$h"
    else
      tc qdisc replace dev "$(ns "$h")" root netem "$@" 2>/dev/null ||
        die "tc netem failed on $(ns "$h"): this kernel ($(uname -r)) may lack the netem qdisc (sch_netem); shape HOST RATE LATENCY needs only tbf"
      in_ns "$h" tc qdisc replace dev eth0 root netem "$@"
    fi ;;
  shape)
    host_arg "${1:-}"; h=$1; shift
    if [ "${1:-}" = off ]; then
      link_off "$h"
    else
      rate=${1:?want a rate like 512kbit} latency=${2:?want a latency like 200ms}
      tc qdisc replace dev "$(ns "$h")" root tbf rate "$rate" burst 4kb latency "$latency"
      in_ns "$h" tc qdisc replace dev eth0 root tbf rate "$rate" burst 4kb latency "$latency"
    fi ;;
  loss)
    host_arg "${1:-}"; h=$1; shift
    command -v nft >/dev/null || need_pkg /usr/sbin/nft nftables
    nft delete table netdev "$(loss_table "$h")" 2>/dev/null || true
    if [ "${1:-}" != off ]; then
      pct=${1:?want a percentage like 5%}; pct=${pct%\%}
      case "$pct" in ''|*[!0-9]*) die "want a whole percentage like 5%, got $1";; esac
      [ "$pct" -le 100 ] || die "want a percentage up to 100%, got $1"
      # On the bridge's end of the host's link: ingress is what the host sends, egress what
      # it receives; dropped silently, as a lossy wire would.
      nft -f - <<NFT
table netdev $(loss_table "$h") {
  chain from_host { type filter hook ingress device "$(ns "$h")" priority 0; numgen random mod 100 < $pct drop; }
  chain to_host { type filter hook egress device "$(ns "$h")" priority 0; numgen random mod 100 < $pct drop; }
}
NFT
    fi ;;
  stop-node)
    host_arg "${1:-}"; locate
    f="$(hdir "$1")/${2:?want master, worker, zookeeper, patroni or haproxy}.pid"
    case "$2" in
      # The node under its supervisor, which starts it again.
      master|worker) [ -s "$f" ] && pkill -9 -P "$(cat "$f")" 2>/dev/null || true ;;
      *) [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; rm -f "$f" ;;
    esac
    # Patroni's PostgreSQL outlives Patroni killed alone; a lost PostgreSQL node is both.
    [ "$2" = patroni ] && pkill -9 -f "$(hdir "$1")/patroni/data" 2>/dev/null || true ;;
  switchover)
    locate
    p=$(primary) || die "no PostgreSQL primary to switch over from"
    to=()
    if [ -n "${1:-}" ]; then host_arg "$1"; to=(--candidate "pg$1"); fi
    # patronictl reaches the ensemble and the nodes' REST APIs from inside a host; it returns
    # once the candidate has been promoted, the old primary then rejoins as a standby.
    in_ns "$p" patronictl -c "$(hdir "$p")/etc/patroni/config.yml" switchover --leader "pg$p" "${to[@]}" --force ;;
  exec) host_arg "${1:-}"; h=$1; shift; in_ns "$h" "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
