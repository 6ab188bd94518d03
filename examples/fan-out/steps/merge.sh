#!/bin/sh
# Sums the row counts every process[…] step recorded, one file per dependency in
# $APOLLO11_INPUTS.
set -eu
total=0
count=0
for f in "$APOLLO11_INPUTS"/process*; do
  total=$((total + $(cat "$f")))
  count=$((count + 1))
done
echo "{\"partitions\": $count, \"rows\": $total}" > "$APOLLO11_OUTPUT"
echo "merged $count partitions: $total rows"
