#!/bin/sh
# One `apollo11 worker` per host of ../ops-runbook/hosts.toml, all on this machine, each
# named after its host and carrying the label `host=HOST`: where the host steps of this
# folder's workflow run. Ctrl-C (or a SIGTERM to this script) stops them all.
#
#   sh examples/ops-runbook-workers/workers.sh http://127.0.0.1:8711 [OPTION...]
#
# Each OPTION goes before `worker` (`--token-file F`: the server's worker token). APOLLO11
# names the binary (default: `apollo11` on the PATH); each worker's files are under
# WORK_DIR/HOST (default: .apollo11-workers/HOST).
set -eu
server=${1:?usage: workers.sh http://HOST:PORT [OPTION...]}
shift
hosts="$(dirname "$0")/../ops-runbook/hosts.toml"
pids=
trap 'kill $pids 2>/dev/null; wait' INT TERM
for host in $(sed 's/#.*//' "$hosts" | grep -o '"[^"]*"' | tr -d '"'); do
  "${APOLLO11:-apollo11}" "$@" worker --server "$server" --name "$host" --labels "host=$host" \
    --work-dir "${WORK_DIR:-.apollo11-workers}/$host" &
  pids="$pids $!"
done
wait
