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
# slow insert does not move it. The beats come from this script, in the task's process group:
# when the task is killed they stop, and the last one says until when the run was alive.
#
# A fault test runs hundreds of these at once on a small machine, so a run costs little: one
# psql session writes all its events (opened again if it dies), the start and the end wait for
# their commit and the beats do not, and the wait between beats is a read that times out, not
# a sleep process.
set -u
export LC_ALL=C
dsn=${RUNLOG_DSN:?} table=${RUNLOG_TABLE:?}
# Debian's psql is a Perl script that picks a version and runs its psql: run that at once.
psql=psql
for p in /usr/lib/postgresql/*/bin/psql; do
	[ -x "$p" ] && psql=$p
done
task=${ZKSCHED_TASK_INSTANCE:?} attempt=${ZKSCHED_ATTEMPT:?} worker=${ZKSCHED_WORKER:?}

row() { # row EVENT: sets stmt to the insert of EVENT, now
	printf -v stmt "INSERT INTO %s (task_instance_id, attempt, worker, event, at) VALUES (%d, %d, '%s', '%s', to_timestamp(%s));" \
		"$table" "$task" "$attempt" "$worker" "$1" "$EPOCHREALTIME"
}

# A write to a psql that died fails instead of ending the script; the body gets SIGPIPE back.
trap '' PIPE
to='' from='' log_pid=''
open_log() { # (re)opens the psql session: its input on fd $to, its output on fd $from
	[ -n "$to" ] && exec {to}>&- {from}<&-
	[ -n "$log_pid" ] && kill "$log_pid" 2>/dev/null
	local dir
	dir=$(mktemp -d "${TMPDIR:-/tmp}/zksched-runlog.XXXXXX") || return 1
	mkfifo "$dir/in" "$dir/out" || return 1
	"$psql" -X -q -v ON_ERROR_STOP=1 -d "$dsn" <"$dir/in" >"$dir/out" 2>/dev/null &
	log_pid=$!
	exec {to}>"$dir/in" {from}<"$dir/out"
	rm -rf "$dir"
	printf 'SET synchronous_commit = off;\n' >&"$to"
}

record() { # record EVENT: committed to the log before going on, whatever it takes
	local stmt ack
	row "$1"
	until printf 'BEGIN; SET LOCAL synchronous_commit = on; %s COMMIT;\n\\echo recorded\n' "$stmt" >&"$to" &&
		read -r -t 10 -u "$from" ack && [ "$ack" = recorded ]; do
		sleep 0.1
		open_log
	done
}

open_log
record start

(
	trap - PIPE
	exec bash -c "$1"
) &
body=$!
exec {tick}<> <(:)
while kill -0 "$body" 2>/dev/null; do
	row beat
	printf '%s\n' "$stmt" >&"$to" || open_log
	read -r -t 0.1 -u "$tick"
done
wait "$body"
status=$?
if [ "$status" -ne 0 ]; then
	exit "$status"
fi
record end
exec {to}>&-
wait "$log_pid"
echo "ran task $task attempt $attempt on $worker"
