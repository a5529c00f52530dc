#!/bin/bash
echo "step ${1:?usage: step.sh NAME} on $ZKSCHED_WORKER"
