. steps/lib.sh
# $1: where feature's chunk files start (its output's `prefix`).
cat "$1"*.csv | awk -F, '{
  z = -0.4 + 2.1 * $1 - 1.3 * $2 + 0.8 * $3; p = 1 / (1 + exp(-z))
  printf "%.4f\n", p; if (p > 0.7) alerts++; rows++
} END { printf "{\"rows\": %d, \"alerts\": %d}\n", rows, alerts > "/dev/stderr" }' 2> "$WORK/infer.stats" | atomic "$WORK/predictions.csv"
cp "$WORK/infer.stats" "$APOLLO11_OUTPUT"
