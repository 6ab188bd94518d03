. steps/lib.sh
# Keyed: a rerun with the same idempotency key finds the data in place and does nothing.
if [ -f "$WORK/raw.csv" ] && [ "$(cat "$WORK/raw.key" 2>/dev/null)" = "$APOLLO11_IDEMPOTENCY_KEY" ]; then
  output "{\"rows\": $(($(wc -l < "$WORK/raw.csv") - 1)), \"file\": \"$WORK/raw.csv\", \"reused\": true}"
  exit 0
fi
seed=$(printf '%s' "$APOLLO11_IDEMPOTENCY_KEY" | cksum | cut -d' ' -f1)
awk -v seed="$seed" -v rows="${ROWS:-200000}" 'BEGIN {
  srand(seed % 2147483647); print "id,temperature,humidity"
  for (i = 0; i < rows; i++) {
    t = int(rand() * 600) / 10; h = int(rand() * 1000) / 10; r = rand()
    if (r < 0.002) print i ",n/a," h
    else if (r < 0.004) print i "," t + 90 "," h
    else print i "," t "," h
  }
}' | atomic "$WORK/raw.csv"
printf '%s' "$APOLLO11_IDEMPOTENCY_KEY" | atomic "$WORK/raw.key"
output "{\"rows\": $(($(wc -l < "$WORK/raw.csv") - 1)), \"file\": \"$WORK/raw.csv\"}"
