#!/bin/bash
# Adds up a JSON array of numbers given as one argument, such as ["12","30"].
set -eu
total=0
for n in $(tr -d '[]"' <<<"${1:?usage: sum.sh JSON_ARRAY}" | tr , ' '); do
  total=$((total + n))
done
echo "$total"
