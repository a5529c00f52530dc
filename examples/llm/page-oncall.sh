#!/bin/bash
# A tool of examples/llm/agent-tools.yaml: pages the on-call person of team $ZKSCHED_ARG_team
# with $ZKSCHED_ARG_message. Here a page is a line in ${TMPDIR:-/tmp}/zksched-agent-tools/pages.txt,
# with the call's id, which names the call across retries and failovers.
set -eu
pages=${TMPDIR:-/tmp}/zksched-agent-tools
mkdir -p "$pages"
printf '%s\t%s\t%s\n' "$ZKSCHED_TOOL_CALL_ID" "$ZKSCHED_ARG_team" "$ZKSCHED_ARG_message" >> "$pages/pages.txt"
echo "paged the on-call person of team $ZKSCHED_ARG_team"
