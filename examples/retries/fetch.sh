#!/bin/bash
# Stands in for a fetch from a flaky source: the first attempt finds it unavailable (exit 75,
# which the task's retry-on retries); a later one gets the data.
if [ "$ZKSCHED_ATTEMPT" -lt 2 ]; then
  echo "source unavailable (attempt $ZKSCHED_ATTEMPT)" >&2
  exit 75
fi
echo "fetched 42 records on attempt $ZKSCHED_ATTEMPT"
