#!/bin/bash
# Stands in for a deploy of the pushed commit: $1 the ref, $2 the commit.
set -eu
echo "deployed ${2:-HEAD} of $1"
