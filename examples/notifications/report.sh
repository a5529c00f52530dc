#!/bin/bash
# Stands in for a report that may fail: REPORT_FAIL=1 in the task's env: makes it fail.
set -eu
[ "${REPORT_FAIL:-0}" = 1 ] && { echo "the report failed" >&2; exit 1; }
echo "report written"
