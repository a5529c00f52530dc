#!/usr/bin/env bash
# quickstart.sh [stop] — the whole of zksched on this machine, from nothing:
#   ZooKeeper and PostgreSQL (installed if missing, on loopback, data under .run/), the binary,
#   the schema, one master and two workers, and the demo workflow submitted and waited for.
# Run it again to restart the nodes and submit the demo once more; `quickstart.sh stop` stops
# the nodes and the servers.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export PATH="$PATH:/usr/local/go/bin"
qs="$top/.run/quickstart"
bin="$top/bin/zksched"
mkdir -p "$qs"

stop_nodes() {
  for pidfile in "$qs"/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

if [ "${1:-}" = stop ]; then
  stop_nodes
  bin/services.sh stop
  exit 0
fi

bin/services.sh start
eval "$(bin/services.sh env | sed 's/^/export /')"

echo "== building bin/zksched"
go build -o "$bin" ./cmd/zksched

# A worker run as root runs its shell tasks as an unprivileged user of their own (a worker
# refuses to run them as root): zksched-task, made here when the machine lacks it.
task_user=""
if [ "$(id -u)" = 0 ]; then
  task_user=zksched-task
  id "$task_user" >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin "$task_user"
  # The examples run the scripts beside their files (workdir: .), as the task user.
  if ! runuser -u "$task_user" -- test -x "$PWD/examples/nightly-report/extract.sh"; then
    echo "note: $task_user cannot reach $PWD, so the examples that run scripts beside their files" >&2
    echo "      (docs/workflows.md) fail there; a clone under /srv or /opt, or o+x on the folders above it, lets it" >&2
  fi
fi

# One config per node: the master's HTTP port and each worker's port are part of their
# identities. Everything else comes from ZKSCHED_* (set above) and the defaults; the master,
# given no token, generates one into ~/.local/state/zksched/api-token, where the CLI of this
# user finds it.
write_config() { # name role port
  cat > "$qs/$1.yaml" <<CFG
node: {host: 127.0.0.1}
master: {port: $3}
worker: {port: $3, slots: 4, shutdown-timeout: 10s, task-user: "$task_user"}
log: {level: info, format: json}
CFG
}
write_config master master 5678
write_config worker-1 worker 5679
write_config worker-2 worker 5680

echo "== migrating the database"
"$bin" migrate

stop_nodes
echo "== starting a master and two workers (logs in $qs/*.log)"
start() { # name script
  ZKSCHED_BIN="$bin" setsid "bin/$2" "$qs/$1.yaml" >"$qs/$1.log" 2>&1 </dev/null &
  echo $! > "$qs/$1.pid"
}
start master start-master.sh
start worker-1 start-worker.sh
start worker-2 start-worker.sh

echo "== submitting examples/demo.yaml and waiting for it"
"$bin" submit --wait examples/demo.yaml

echo
echo "== the registry in ZooKeeper (zksched zk tree)"
"$bin" zk tree
token_file=$(grep -o '"token_file":"[^"]*"' "$qs/master.log" | head -n 1 | cut -d'"' -f4)
cat <<MSG

zksched is running:
  web UI          http://127.0.0.1:5678/          (overview charts, task instances, workflows with their DAG and timeline, cluster)
  HTTP API        http://127.0.0.1:5678/api/v1/   (JSON; /metrics, /healthz, /readyz beside it)
  admin token     $token_file   (the UI's login; Authorization: Bearer for the API)
  the registry    $bin zk tree    |  $bin zk nodes
  node logs       $qs/{master,worker-1,worker-2}.log
  submit more     $bin submit --wait examples/demo.yaml
  stop it all     bin/quickstart.sh stop
(in another shell, first: eval "\$(bin/services.sh env | sed 's/^/export /')")
MSG
