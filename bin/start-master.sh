#!/usr/bin/env bash
# start-master.sh [CONFIG] — run one zksched master in the foreground from a config file
# (default: $ZKSCHED_CONFIG, else /etc/zksched/zksched.yaml). It ends in exec, so SIGTERM from
# a supervisor (systemd, the quickstart) reaches the master itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin="${ZKSCHED_BIN:-$here/zksched}"
[ -x "$bin" ] || bin=$(command -v zksched) || { echo "start-master.sh: no zksched binary (build it: go build -o bin/zksched ./cmd/zksched)" >&2; exit 1; }
exec "$bin" master --config "${1:-${ZKSCHED_CONFIG:-/etc/zksched/zksched.yaml}}"
