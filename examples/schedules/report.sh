#!/bin/bash
# Stands in for a day's report: a fire gives the day as its param fire_date.
set -eu
echo "report for ${1:?usage: report.sh DAY}"
