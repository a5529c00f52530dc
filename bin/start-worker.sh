#!/usr/bin/env bash
# start-worker.sh [CONFIG] — run one zksched worker in the foreground from a config file
# (default: $ZKSCHED_CONFIG, else /etc/zksched/zksched.yaml). It ends in exec, so SIGTERM from
# a supervisor (systemd, the quickstart) reaches the worker itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin="${ZKSCHED_BIN:-$here/zksched}"
[ -x "$bin" ] || bin=$(command -v zksched) || { echo "start-worker.sh: no zksched binary (build it: go build -o bin/zksched ./cmd/zksched)" >&2; exit 1; }
exec "$bin" worker --config "${1:-${ZKSCHED_CONFIG:-/etc/zksched/zksched.yaml}}"
