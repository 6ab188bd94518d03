# Shared by the steps: the run's work folder and an atomic write (temp file, then mv).
set -eu
WORK="work/${APOLLO11_RUN_ID}"
mkdir -p "$WORK"
# atomic DEST: reads stdin into DEST.tmp, then renames it into place.
atomic() { cat > "$1.tmp" && mv "$1.tmp" "$1"; }
output() { printf '%s\n' "$1" > "$APOLLO11_OUTPUT"; }
