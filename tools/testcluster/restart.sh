#!/usr/bin/env bash
# restart.sh COMPONENT - kill one running component of the local test cluster (SIGKILL: a
# crash; the API server's graceful shutdown would take over 15 s) and start it again with
# the same command line, for tests of how clients live through it (an API server
# restarted during a run).  Only kube-apiserver, kube-controller-manager and
# kube-scheduler: the node's processes own containers.  Waits until the API server is
# ready again.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAME=${1:-}
case "$NAME" in
  kube-apiserver) PORT=$APISERVER_PORT ;;
  kube-controller-manager) PORT=$KCM_PORT ;;
  kube-scheduler) PORT=$SCHED_PORT ;;
  *) echo "usage: restart.sh kube-apiserver|kube-controller-manager|kube-scheduler" >&2; exit 2 ;;
esac
require_root
check_state_dir
lock_state
PID=$(running "$NAME")
[ -n "$PID" ] || die "$NAME is not running (pid file $RUN/$NAME.pid); run up.sh"
mapfile -d '' ARGV < "/proc/$PID/cmdline"
[ "${#ARGV[@]}" -gt 0 ] || die "cannot read the command line of $NAME ($PID)"
kill -KILL "$PID"
while [ -d "/proc/$PID" ] && [ "$({ awk '{print $3}' "/proc/$PID/stat"; } 2>/dev/null)" != Z ]; do sleep 0.05; done
# The thread group leader turns zombie before its other threads have exited and closed
# the listening socket: wait for the port too, or the new instance cannot bind it.
wait_until "port $PORT of the killed $NAME to close" 30 "" port_closed "$PORT"
log "killed $NAME ($PID)"
start_daemon "$NAME" "${ARGV[@]}" || die "cannot start $NAME again"
wait_until "kube-apiserver /readyz" 60 kube-apiserver apiserver_ready
log "restarted $NAME (pid $(running "$NAME"))"
