#!/bin/sh
# Lists N partitions as its output, JSON: {"partitions": ["p01", …]}.
set -eu
n="$1"
{
  printf '{"partitions": ['
  i=1
  while [ "$i" -le "$n" ]; do
    [ "$i" -gt 1 ] && printf ', '
    printf '"p%02d"' "$i"
    i=$((i + 1))
  done
  printf ']}\n'
} > "$APOLLO11_OUTPUT"
echo "found $n partitions"
