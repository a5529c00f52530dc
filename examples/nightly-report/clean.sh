#!/bin/bash
# Stands in for a transform: it reads extract's output and the region it is given.
set -eu
region=${1:?usage: clean.sh REGION}
rows=${ZKSCHED_UPSTREAM_extract_OUTPUT#rows=}
echo "dropping rows outside region $region"
echo "rows=$((rows / 2)) region=$region"
