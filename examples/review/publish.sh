#!/bin/bash
# Publishes the text on its standard input: here it prints it, as the task's output.
set -eu
text=$(cat)
[ -n "$text" ] || { echo "nothing to publish" >&2; exit 1; }
echo "published: $text"
