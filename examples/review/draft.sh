#!/bin/bash
# Stands in for a draft: its last line, the output, is what the reviewer reads on the task's page.
echo "draft: zksched now runs relative commands in the workflow file's folder"
