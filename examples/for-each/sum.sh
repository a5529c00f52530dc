#!/bin/bash
# Adds up the JSON array of numbers on its standard input, such as ["12","30"]: a for-each's
# output, read from its file.
set -eu
total=0
for n in $(tr -d '[]"\n' | tr , ' '); do
  total=$((total + n))
done
echo "$total"
