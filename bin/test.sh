#!/usr/bin/env bash
# test.sh — the whole test suite: starts the local ZooKeeper and PostgreSQL (installing them if
# missing) and chromium for the browser tests, checks formatting and vet, and runs every test
# with the race detector against the real servers. Each test isolates itself (its own ZooKeeper root and PostgreSQL schema).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

bin/services.sh start
# The tests reach the servers as `services.sh env` gives them (the DSN with zksched's
# password), unless ZKSCHED_TEST_DSN or ZKSCHED_TEST_ZK already name others.
services_env=$(bin/services.sh env)
export ZKSCHED_TEST_DSN="${ZKSCHED_TEST_DSN:-$(sed -n 's/^ZKSCHED_DB_DSN=//p' <<<"$services_env")}"
export ZKSCHED_TEST_ZK="${ZKSCHED_TEST_ZK:-$(sed -n 's/^ZKSCHED_REGISTRY_SERVERS=//p' <<<"$services_env")}"

# The browser tests (e2e/ui_test.go) drive Debian's chromium through chromedp. Install
# it when missing (about a minute on a fresh machine; nothing to do when it is there).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then echo "chromium is missing and only root can install it (apt-get install chromium)"; exit 1; fi
  echo "== installing chromium for the browser tests"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# The Debian package's test (internal/release) installs it into a root file system that
# mmdebstrap makes from Debian's packages (cached in .run/ after the first run).
if ! command -v mmdebstrap >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then echo "mmdebstrap is missing and only root can install it (apt-get install mmdebstrap)"; exit 1; fi
  echo "== installing mmdebstrap for the Debian package's test"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi

# The completion test (e2e/completion_e2e_test.go) runs the scripts in zsh and fish too.
if ! command -v zsh >/dev/null 2>&1 || ! command -v fish >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then echo "zsh or fish is missing and only root can install them (apt-get install zsh fish)"; exit 1; fi
  echo "== installing zsh and fish for the completion test"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zsh fish >/dev/null
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.run/*'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
# The packages first, in parallel; then the tests that run real zksched processes against
# short (2 s) ZooKeeper sessions, on their own: a machine busy with the rest of the suite would
# starve a node past its session timeout and fail a fault test for no fault of zksched's.
echo "== go test -race: packages"
go test -race -count=1 -timeout 20m "$@" $(go list ./... | grep -v '/e2e$')
echo "== go test -race: real processes (end to end, fault and browser tests)"
go test -race -count=1 -timeout 60m "$@" ./e2e
