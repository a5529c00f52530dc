#!/bin/bash
# A tool of examples/agent-tools.yaml: pages the on-call person of team $ZKSCHED_ARG_team
# with $ZKSCHED_ARG_message. Here a page is a line in /tmp/zksched-agent-tools/pages.txt,
# with the call's id, which names the call across retries and failovers.
set -eu
mkdir -p /tmp/zksched-agent-tools
printf '%s\t%s\t%s\n' "$ZKSCHED_TOOL_CALL_ID" "$ZKSCHED_ARG_team" "$ZKSCHED_ARG_message" >> /tmp/zksched-agent-tools/pages.txt
echo "paged the on-call person of team $ZKSCHED_ARG_team"
