#!/bin/sh
# Tells someone a partition failed (here: the step's log, which `apollo11 status` links).
echo "a partition failed for good in run $APOLLO11_RUN_ID: look at its log, fix, then override or resume"
