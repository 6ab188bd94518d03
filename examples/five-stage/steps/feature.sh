. steps/lib.sh
# $1: the file clean wrote (its output's `file`). Its output's `prefix` names the chunk files.
# Checkpoint: each finished chunk is recorded in the output file, which becomes the payload
# of a failed attempt; the next attempt gets it back in the file APOLLO11_PREVIOUS_PAYLOAD_FILE.
chunk_rows=50000
done_chunks=$(sed -n 's/.*"chunks_done": *\([0-9]*\).*/\1/p' "${APOLLO11_PREVIOUS_PAYLOAD_FILE:-/dev/null}")
done_chunks=${done_chunks:-0}
rows=$(($(wc -l < "$1") - 1))
chunks=$(( (rows + chunk_rows - 1) / chunk_rows ))
c=$done_chunks
while [ "$c" -lt "$chunks" ]; do
  awk -F, -v from=$((c * chunk_rows + 2)) -v to=$(((c + 1) * chunk_rows + 1)) 'NR >= from && NR <= to {
    n++; w[n % 10] = $2; k = (n < 10 ? n : 10); s = 0; for (j in w) s += w[j]
    printf "%.4f,%.4f,%.4f\n", ($2 + 40) / 100, $3 / 100, (s / k + 40) / 100
  }' "$1" | atomic "$WORK/features-$c.csv"
  c=$((c + 1))
  output "{\"chunks_done\": $c, \"chunks\": $chunks, \"prefix\": \"$WORK/features-\"}"
done
output "{\"chunks_done\": $chunks, \"chunks\": $chunks, \"prefix\": \"$WORK/features-\"}"
