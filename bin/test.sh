#!/usr/bin/env bash
# test.sh — the whole test suite: starts the local ZooKeeper and PostgreSQL (installing them if
# missing), checks formatting and vet, and runs every test with the race detector against the
# real servers. Each test isolates itself (its own ZooKeeper root and PostgreSQL schema).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

bin/services.sh start

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.run/*'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 -timeout 30m "$@" ./...
