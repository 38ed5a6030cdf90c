#!/usr/bin/env bash
# down.sh [--purge] - stop the local test cluster and clean up after it.
#
#   down.sh          stop our processes (only those recorded in the state dir's pid files
#                    or otherwise proven ours: binary name + state dir in the command line),
#                    kubelet first; remove every pod sandbox through CRI; stop containerd;
#                    kill leftover shims of ours; unmount everything under the state dir;
#                    delete our pod netns and the kubeplay0 bridge; remove empty kubepods
#                    cgroups; restore net.ipv4.ip_forward.  PKI, etcd data and the imported
#                    images stay, so the next up.sh is quick.
#   down.sh --purge  also delete the state dir and our entries in the host paths the
#                    kubelet, containerd and libcni hard-code (directories only when up.sh
#                    created them and they are empty), and the cached kubeconfig.
# Safe to run when nothing is up.  Build outputs (<cache>/bin, <cache>/img) are kept.
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PURGE=0
case "${1:-}" in
  "") ;;
  --purge) PURGE=1 ;;
  *) echo "usage: down.sh [--purge]" >&2; exit 2 ;;
esac

require_root
check_state_dir
# The second cluster (cluster2.sh) hangs on the first one's bridge: it goes first.
if [ "${KUBEPLAY_SECOND_CLUSTER:-}" != 1 ]; then
  "$TC_DIR/cluster2.sh" down "$@"
fi
if [ ! -d "$STATE" ]; then
  log "nothing to do: $STATE does not exist"
  exit 0
fi
lock_state

teardown
log "cluster stopped"
[ "$PURGE" = 1 ] || exit 0

# ---------------------------------------------------------------- purge
if awk -v d="$STATE/" 'index($5, d) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
  die "mounts are left under $STATE; not deleting it"
fi
# kubelet's device-plugin socket (hard-coded path), unless some live process serves it
sockpath=/var/lib/kubelet/device-plugins/kubelet.sock
if [ -S "$sockpath" ] && ! grep -q " $sockpath\$" /proc/net/unix; then rm -f "$sockpath"; fi
# shim sockets nobody listens on any more (containerd 1.6 puts them in /run/containerd/s)
for s in /run/containerd/s/*; do
  [ -S "$s" ] || continue
  grep -q " $s\$" /proc/net/unix || rm -f "$s"
done
# directories up.sh created: deepest first, and only when empty
if [ -s "$HOST_PATHS_RECORD" ]; then
  sort -r "$HOST_PATHS_RECORD" | while read -r p; do
    [ -d "$p" ] || continue
    find "$p" -depth -type d -empty -delete 2>/dev/null || true
    if [ -d "$p" ]; then warn "not removed (not empty): $p"; fi
  done
fi
rm -f "$CACHE_KUBECONFIG"
# the state dir, including the lock file we hold (see lock_state)
rm -rf --one-file-system "${STATE:?}"
log "purged $STATE"
