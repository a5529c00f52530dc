#!/usr/bin/env bash
# release.sh [VERSION] — builds a release of the checked-out commit into dist/ (or
# $ZKSCHED_DIST): for each architecture (linux amd64 and arm64, or those in
# $ZKSCHED_RELEASE_ARCHES) the static binary zksched_VERSION_linux_ARCH and the Debian package
# zksched_VERSION_ARCH.deb and the binary's SBOM zksched_VERSION_linux_ARCH.cdx.json (CycloneDX,
# the modules linked into it); and SHA256SUMS of them all.
#
# VERSION defaults to the commit's tag (git describe --tags --exact-match, a leading v dropped),
# else 0.0.0-YYYYMMDD-COMMIT (the commit's UTC date and 12 hex digits of its hash). Every date
# is the commit's (SOURCE_DATE_EPOCH), paths are trimmed and the binaries are static and
# stripped, so two builds of one commit are byte-identical (internal/release tests it).
# zksched-bench is not released: it links the test harness and runs from a checkout.
#
# The packaging tools run with `go run MODULE@VERSION`, pinned here, so they stay out of
# go.mod; the module proxy (or the module cache, once filled) supplies them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

nfpm=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
cyclonedx=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0

commit=$(git rev-parse HEAD)
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
version="${1:-}"
if [ -z "$version" ]; then
  version=$(git describe --tags --exact-match 2>/dev/null) ||
    version="0.0.0-$(TZ=UTC date -d "@$SOURCE_DATE_EPOCH" +%Y%m%d)-${commit:0:12}"
fi
version="${version#v}"
case "$version" in
  [0-9]*) ;;
  *) echo "release.sh: version $version does not start with a digit (Debian needs one)" >&2; exit 2;;
esac
# Uncommitted changes to tracked files are built, and the commit says so.
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then commit="$commit+dirty"; fi
date=$(TZ=UTC date -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
dist="${ZKSCHED_DIST:-dist}"
arches="${ZKSCHED_RELEASE_ARCHES:-amd64 arm64}"
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

pkg=github.com/zksched/zksched/internal/buildinfo
ldflags="-s -w -buildid= -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.date=$date"

# binary ARCH: the static zksched for linux/ARCH.
binary() {
  CGO_ENABLED=0 GOOS=linux GOARCH="$1" GOFLAGS= \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dist/zksched_${version}_linux_$1" ./cmd/zksched
}

# deb ARCH: the Debian package (deploy/debian/nfpm.yaml) around that binary, with the units
# of deploy/ running /usr/bin/zksched.
deb() {
  local s="$stage/$1"
  mkdir -p "$s"
  cp "$dist/zksched_${version}_linux_$1" "$s/zksched"
  for unit in zksched-master.service zksched-worker.service; do
    sed 's#/usr/local/bin/zksched#/usr/bin/zksched#g' "deploy/$unit" > "$s/$unit"
  done
  cp "$stage/completion/"* "$s/"
  ZKSCHED_VERSION="$version" ZKSCHED_ARCH="$1" ZKSCHED_STAGE="$s" GOFLAGS= \
    go run "$nfpm" package --config deploy/debian/nfpm.yaml --packager deb \
    --target "$dist/zksched_${version}_$1.deb" >"$stage/nfpm.log" 2>&1 || { cat "$stage/nfpm.log" >&2; return 1; }
}

# sbom ARCH: the CycloneDX SBOM of that binary, from the module versions its build information
# records (what is linked in, replaced modules included), with no timestamp, a serial number
# derived from the version, commit and architecture, and no license detection (it would depend
# on what the module cache holds).
sbom() {
  local h
  h=$(printf '%s %s %s' "$version" "$commit" "$1" | sha256sum)
  GOFLAGS= go run "$cyclonedx" bin -json -notimestamp -version "$version" \
    -serial "urn:uuid:${h:0:8}-${h:8:4}-${h:12:4}-${h:16:4}-${h:20:12}" \
    -output "$dist/zksched_${version}_linux_$1.cdx.json" "$dist/zksched_${version}_linux_$1" \
    >"$stage/sbom.log" 2>&1 || { cat "$stage/sbom.log" >&2; return 1; }
}

# The shell completion scripts, the same for every architecture: written by this checkout's
# zksched, which may not be one the machine can run.
mkdir -p "$stage/completion"
for shell in bash zsh fish; do
  GOFLAGS= go run ./cmd/zksched completion "$shell" > "$stage/completion/$shell"
done

for arch in $arches; do
  binary "$arch"
  deb "$arch"
  sbom "$arch"
done
# The OCI image and the Helm chart's package join the release here, written into "$dist"
# before the checksums are taken.

(cd "$dist" && sha256sum -- zksched_"$version"* > SHA256SUMS)
echo "$dist: zksched $version ($commit)"
