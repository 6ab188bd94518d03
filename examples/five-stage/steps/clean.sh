. steps/lib.sh
# $1: the file collect wrote (its output's `file`).
awk -F, -v out="$WORK/clean.csv" 'NR == 1 { print; next }
  $2 ~ /^-?[0-9.]+$/ && $3 ~ /^[0-9.]+$/ && $2 >= -40 && $2 <= 60 && $3 >= 0 && $3 <= 100 { print; kept++; next }
  { dropped++ }
  END { printf "{\"rows\": %d, \"dropped\": %d, \"file\": \"%s\"}\n", kept, dropped, out > "/dev/stderr" }' "$1" 2> "$WORK/clean.stats" | atomic "$WORK/clean.csv"
cp "$WORK/clean.stats" "$APOLLO11_OUTPUT"
