#!/bin/sh
# Simulated operations on a fleet: each action records the host's state in state/HOST, so
# reruns are idempotent (keyed by host) and an upgrade can be rolled back.
set -eu
action=$1 host=${2:-}
mkdir -p state
sleep "0.0$(printf '%s' "$host$action" | cksum | cut -c1)"
case "$action" in
  precheck) ls state > /dev/null; echo "fleet reachable" ;;
  drain)    echo drained > "state/$host.traffic" ;;
  upgrade)  [ "${FAIL_HOST:-}" != "$host" ] || { echo "upgrade of $host failed; it was left on its old version" >&2; exit 3; }
            [ -f "state/$host.version" ] && cp "state/$host.version" "state/$host.previous" || echo v1 > "state/$host.previous"
            echo v2 > "state/$host.version.tmp" && mv "state/$host.version.tmp" "state/$host.version" ;;
  rollback) [ -f "state/$host.previous" ] && mv "state/$host.previous" "state/$host.version" || true ;;
  undrain)  echo serving > "state/$host.traffic" ;;
  gate)     echo "wave $host healthy" ;;
  report)   printf '{"upgraded": %s}\n' "$(grep -l v2 state/*.version 2>/dev/null | wc -l)" > "$APOLLO11_OUTPUT" ;;
  *) echo "unknown action $action" >&2; exit 2 ;;
esac
