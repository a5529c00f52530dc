#!/bin/bash
# Stands in for `mail -s SUBJECT TO`: it prints the mail it would send, whose last line, the
# task's output, says where it went.
set -eu
subject=${1:?usage: mail.sh SUBJECT TO} to=${2:?usage: mail.sh SUBJECT TO}
body=$(cat)
printf 'To: %s\nSubject: %s\n\n%s\n' "$to" "$subject" "$body"
echo "mailed $subject ($(wc -c <<<"$body") bytes) to $to"
