#!/bin/bash
# Stands in for a load: it reports what reached it from the tasks it depends on.
set -eu
echo "loaded ${ZKSCHED_UPSTREAM_clean_OUTPUT:?}${ZKSCHED_UPSTREAM_enrich_OUTPUT:+, $ZKSCHED_UPSTREAM_enrich_OUTPUT}"
