#!/usr/bin/env bash
# run-logged.sh BODY: one run of a fault test's task. It records in the test's run log a start
# before running BODY (with bash -c), a beat every 100 ms while BODY runs, and an end once BODY
# has succeeded; then it prints the result line that becomes the task's output.
#
# The worker gives it ZKSCHED_TASK_INSTANCE, ZKSCHED_ATTEMPT and ZKSCHED_WORKER; the test gives
# the worker RUNLOG_DSN (a libpq URI) and RUNLOG_TABLE (the schema-qualified run log: psql
# ignores lib/pq's search_path parameter), which it passes on through worker.task-env.
#
# Every event carries the shell's own clock ($EPOCHREALTIME) at the moment it happened, so a
# slow insert does not move it. The beats come from this process group: when the task is
# killed they stop, and the last one says until when the run was alive.
set -u
export LC_ALL=C
dsn=${RUNLOG_DSN:?} table=${RUNLOG_TABLE:?}
task=${ZKSCHED_TASK_INSTANCE:?} attempt=${ZKSCHED_ATTEMPT:?} worker=${ZKSCHED_WORKER:?}

row() { # row EVENT: sets stmt to the insert of EVENT, now
	printf -v stmt "INSERT INTO %s (task_instance_id, attempt, worker, event, at) VALUES (%d, %d, '%s', '%s', to_timestamp(%s));" \
		"$table" "$task" "$attempt" "$worker" "$1" "$EPOCHREALTIME"
}

record() { # record EVENT: in the log before going on, whatever it takes
	local stmt
	row "$1"
	until psql -X -q -v ON_ERROR_STOP=1 -d "$dsn" -c "$stmt" >/dev/null; do sleep 0.1; done
}

record start

# The beats go through one psql session fed by a loop; a stop file ends them (killing the
# subshell would leave its pipeline running). A session that dies is opened again.
stop=$(mktemp -u "${TMPDIR:-/tmp}/zksched-beats.XXXXXX")
(
	while [ ! -e "$stop" ]; do
		while [ ! -e "$stop" ]; do
			row beat
			printf '%s\n' "$stmt" || exit
			sleep 0.1
		done | psql -X -q -d "$dsn" >/dev/null 2>&1
	done
) &
beats=$!

bash -c "$1"
status=$?
: >"$stop"
wait "$beats"
rm -f "$stop"
if [ "$status" -ne 0 ]; then
	exit "$status"
fi
record end
echo "ran task $task attempt $attempt on $worker"
