#!/usr/bin/env bash
# regen.sh — writes the patch files of the patched go-zookeeper copy (internal/third_party/zk)
# from the copy itself, so that the patches in this folder, applied in order to upstream v1.0.4,
# give the copy exactly. internal/third_party/zkpatch's test checks that they do.
#
#   regen.sh add NAME      the copy's changes that no patch holds yet become the next patch,
#                          NNNN-NAME.patch, with a header to write (what the patch does, why)
#   regen.sh refresh NNNN  rewrites patch NNNN's diff from the copy, keeping its header: for a
#                          change to what an earlier patch holds (the later patches must still
#                          apply to the copy in reverse, so the change cannot overlap them)
#   regen.sh check         applies every patch to upstream and diffs the result with the copy
#
# Only the copy's own files count (PATCHES.md and this folder aside): upstream files the copy
# leaves out (tests, examples, CI settings) are not in any patch. Needs go (for the upstream
# module, from the module cache or the proxy), diff and patch.
set -euo pipefail
shopt -s inherit_errexit

module=github.com/go-zookeeper/zk@v1.0.4
patches=$(cd "$(dirname "$0")" && pwd)
copy=$(dirname "$patches")

usage() { sed -n '6,11s/^# \{0,1\}//p' "$0" >&2; exit 2; }
case "${1:-}" in add | refresh | check) ;; *) usage ;; esac

upstream=$(cd "$copy" && go mod download -json "$module" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
if [ -z "$upstream" ] || [ ! -d "$upstream" ]; then
  echo "regen.sh: go mod download $module gave no directory" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_files lists the copy's files, relative to it, that the patches must produce.
copy_files() {
  (cd "$copy" && find . -type f ! -path ./PATCHES.md ! -path './patches/*' | sed 's|^\./||' | LC_ALL=C sort)
}

# patch_files lists the patches in the order they apply.
patch_files() {
  find "$patches" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' | LC_ALL=C sort
}

# upstream_with DIR PATCH... copies upstream to DIR and applies the patches, exactly (no fuzz).
upstream_with() {
  local dir=$1 p
  shift
  cp -R "$upstream" "$dir"
  chmod -R u+w "$dir"
  for p in "$@"; do
    (cd "$dir" && patch -p1 -s --fuzz=0 --no-backup-if-mismatch <"$p") ||
      { echo "regen.sh: $(basename "$p") does not apply" >&2; exit 1; }
  done
}

# diff_trees OLD NEW prints a unified diff, a/ and b/ prefixed, of the copy's files from OLD
# to NEW (a file OLD lacks is diffed against nothing, as a new file).
diff_trees() {
  local f
  while read -r f; do
    diff -uN --label "a/$f" --label "b/$f" "$1/$f" "$2/$f" || [ $? -eq 1 ]
  done < <(copy_files)
}

# header PATCH prints the patch's text before its diff.
header() { sed '/^--- a\//,$d' "$1"; }

check() {
  mapfile -t all < <(patch_files)
  upstream_with "$work/check" "${all[@]}"
  local d
  d=$(diff_trees "$work/check" "$copy")
  if [ -n "$d" ]; then
    printf '%s\n' "$d"
    echo "regen.sh: the copy differs from upstream $module with the patches applied (diff above)" >&2
    exit 1
  fi
  echo "the copy is upstream $module with ${#all[@]} patches applied"
}

case "${1:-}" in
add)
  [ $# -eq 2 ] || usage
  name=$2
  mapfile -t all < <(patch_files)
  upstream_with "$work/base" "${all[@]}"
  body=$(diff_trees "$work/base" "$copy")
  if [ -z "$body" ]; then echo "regen.sh: the patches already give the copy; nothing to add" >&2; exit 1; fi
  n=0
  if [ ${#all[@]} -gt 0 ]; then n=$(basename "${all[-1]}"); n=$((10#${n:0:4})); fi
  out=$(printf '%s/%04d-%s.patch' "$patches" $((n + 1)) "$name")
  {
    echo "WRITE ME: one line saying what the patch does."
    echo
    echo "WRITE ME: why: what goes wrong in upstream v1.0.4, how the patch changes it, the upstream"
    echo "issue if there is one, and the test that checks it. Then describe the patch in PATCHES.md,"
    echo "under a heading that names this file."
    echo
    printf '%s\n' "$body"
  } >"$out"
  echo "wrote $out: write its header (the WRITE ME lines) and its section in PATCHES.md"
  ;;
refresh)
  [ $# -eq 2 ] || usage
  mapfile -t all < <(patch_files)
  k=-1
  for i in "${!all[@]}"; do
    case $(basename "${all[$i]}") in "$2"-*) k=$i ;; esac
  done
  [ "$k" -ge 0 ] || { echo "regen.sh: no patch $2-*.patch" >&2; exit 1; }
  # Before: upstream with the patches up to this one. After: the copy with the later patches
  # taken out, last first.
  upstream_with "$work/before" "${all[@]:0:k}"
  cp -R "$copy" "$work/after"
  for ((i = ${#all[@]} - 1; i > k; i--)); do
    (cd "$work/after" && patch -p1 -R -s --fuzz=0 --no-backup-if-mismatch <"${all[$i]}") ||
      { echo "regen.sh: $(basename "${all[$i]}") does not come out of the copy: the change overlaps it, so it belongs to that patch or a new one" >&2; exit 1; }
  done
  { header "${all[$k]}"; diff_trees "$work/before" "$work/after"; } >"$work/new"
  mv "$work/new" "${all[$k]}"
  echo "rewrote ${all[$k]}"
  check
  ;;
check)
  [ $# -eq 1 ] || usage
  check
  ;;
*) usage ;;
esac
