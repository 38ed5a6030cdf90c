#!/usr/bin/env bash
# kubelet.sh stop|start - stop the local test cluster's kubelet (SIGTERM to the pid in its
# pid file, as a crashed or stopped node agent: containerd and the containers run on) and
# start it again with the same command line, for tests of a run whose node goes away.
# stop saves the kubelet's command line beside its pid file; start uses it, waits for
# healthz and for the node to report Ready afresh, and does nothing when the kubelet runs.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ARGV_FILE=$RUN/kubelet.argv
case "${1:-}" in
  stop|start) ;;
  *) echo "usage: kubelet.sh stop|start" >&2; exit 2 ;;
esac
require_root
check_state_dir
lock_state
PID=$(running kubelet)
if [ "$1" = stop ]; then
  [ -n "$PID" ] || die "the kubelet is not running (pid file $RUN/kubelet.pid); run up.sh"
  cp "/proc/$PID/cmdline" "$ARGV_FILE.tmp" && mv -f "$ARGV_FILE.tmp" "$ARGV_FILE"
  kill -TERM "$PID"
  while [ -d "/proc/$PID" ] && [ "$({ awk '{print $3}' "/proc/$PID/stat"; } 2>/dev/null)" != Z ]; do sleep 0.05; done
  wait_until "the stopped kubelet's port $KUBELET_PORT to close" 30 "" port_closed "$KUBELET_PORT"
  log "stopped kubelet ($PID)"
  exit 0
fi
if [ -n "$PID" ]; then
  log "kubelet already running (pid $PID)"
  exit 0
fi
[ -s "$ARGV_FILE" ] || die "no saved command line ($ARGV_FILE): stop it with kubelet.sh stop, or run up.sh"
mapfile -d '' ARGV < "$ARGV_FILE"
SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start_daemon kubelet "${ARGV[@]}" || die "cannot start the kubelet again"
wait_until "kubelet healthz" 60 kubelet curl -fsS --max-time 2 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
wait_until "node $NODE_NAME Ready" 120 kubelet node_ready "$SINCE"
rm -f "$ARGV_FILE"
log "restarted kubelet (pid $(running kubelet))"
