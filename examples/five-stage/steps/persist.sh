. steps/lib.sh
# Not idempotent: appending twice would record the run twice. Its compensation undoes it.
summary=$(cat "$APOLLO11_INPUTS/infer")   # infer's recorded output
printf '%s %s %s\n' "$APOLLO11_RUN_ID" "${DAY:-}" "$summary" >> work/results.log
[ -z "${FAIL_PERSIST:-}" ] || { echo "results store rejected the batch (FAIL_PERSIST)" >&2; exit 7; }
output "$summary"
