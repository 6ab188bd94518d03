. steps/lib.sh
# Idempotent: removes this run's lines, however many there are (none is fine).
touch work/results.log
grep -v "^${APOLLO11_RUN_ID} " work/results.log | atomic work/results.log || true
echo "removed ${APOLLO11_RUN_ID} from work/results.log (recorded output: $(cat "${APOLLO11_STEP_OUTPUT_FILE:-/dev/null}"))"
