#!/usr/bin/env bash
# render.sh N DIR — writes host N's configuration files of the example deployment into DIR:
# DIR/etc/zookeeper/zoo.cfg, DIR/etc/patroni/config.yml, DIR/etc/haproxy/haproxy.cfg and
# DIR/etc/zksched/zksched.yaml, from the templates in deploy/etc with the values of
# deploy/hosts.env (or the file ZKSCHED_HOSTS_ENV names; variables already set in the
# environment win). The secrets come from the environment only:
#   PG_SUPERUSER_PASSWORD  PG_REPLICATION_PASSWORD  ZKSCHED_DB_PASSWORD  API_TOKEN_FILE
# bin/cluster.sh renders the same files for its simulated hosts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n="${1:-}" out="${2:-}"
case "$n" in 1|2|3) ;; *) echo "usage: render.sh N DIR (N: 1, 2 or 3)" >&2; exit 2;; esac
[ -n "$out" ] || { echo "usage: render.sh N DIR" >&2; exit 2; }

# The environment's values win over the file's.
saved=$(export -p)
set -a
# shellcheck disable=SC1090
. "${ZKSCHED_HOSTS_ENV:-$here/hosts.env}"
set +a
eval "$saved"

export N="$n"
host_var="HOST$n"
export THIS="${!host_var}"
export ZK_MIN_SESSION_MS="${ZK_MIN_SESSION_MS:-$((2 * ZK_TICK_MS))}"

for tmpl in "$here"/etc/*/*; do
  rel="etc/${tmpl#"$here"/etc/}"
  mkdir -p "$out/$(dirname "$rel")"
  # Every ${NAME} must be set: a file with a hole in it is worse than none.
  if ! perl -pe 's/\$\{([A-Z0-9_]+)\}/exists $ENV{$1} ? $ENV{$1} : die "render.sh: $ARGV: \${$1} is not set\n"/ge' "$tmpl" > "$out/$rel.tmp"; then
    rm -f "$out/$rel.tmp"; exit 1
  fi
  mv "$out/$rel.tmp" "$out/$rel"
  # The files with passwords are their owner's alone.
  if grep -q 'PASSWORD' "$tmpl"; then chmod 600 "$out/$rel"; else chmod 644 "$out/$rel"; fi
done
