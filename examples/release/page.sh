#!/bin/bash
# Stands in for paging the on-call engineer.
echo "paged on-call: release of workflow instance $ZKSCHED_WORKFLOW_INSTANCE failed"
