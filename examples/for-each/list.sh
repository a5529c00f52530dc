#!/bin/bash
# Prints the .txt files of the folder it is given as one JSON array of paths, on one line:
# the task's output, which a for-each reads.
set -eu
shopt -s nullglob
sep= out=
for f in "${1:?usage: list.sh FOLDER}"/*.txt; do
  out+="$sep\"${f//\"/\\\"}\""
  sep=,
done
echo "[$out]"
