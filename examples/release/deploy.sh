#!/bin/bash
# Stands in for a deploy of what build built.
set -eu
echo "deployed ${ZKSCHED_UPSTREAM_build_OUTPUT#built } to $ZKSCHED_PARAM_env"
