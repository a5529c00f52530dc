#!/bin/bash
# A tool of examples/llm/agent-tools.yaml: prints the last $ZKSCHED_ARG_lines (20 by default)
# lines of the log of job $ZKSCHED_ARG_job's latest run. Here the log is made up.
set -eu
job=$ZKSCHED_ARG_job
lines=${ZKSCHED_ARG_lines:-20}
case "$job" in
nightly-report)
	{
		echo "02:00:01 extract: 61240 rows from orders"
		echo "02:03:12 transform: 61240 rows"
		echo "02:03:13 load: connecting to warehouse-db:5432"
		echo "02:03:43 load: connection refused (warehouse-db:5432), retry 1 of 3"
		echo "02:04:43 load: connection refused (warehouse-db:5432), retry 2 of 3"
		echo "02:05:43 load: connection refused (warehouse-db:5432), giving up"
		echo "02:05:43 owner: team data"
	} | tail -n "$lines"
	;;
*)
	echo "no job named $job" >&2
	exit 1
	;;
esac
