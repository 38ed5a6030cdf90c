#!/usr/bin/env bash
# cluster2.sh up | down [--purge] | kubelet stop|start | restart COMPONENT - the second test
# cluster: a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and
# a node (kubelet, containerd) of their own, for tests of two clusters (a Cluster API parent and
# child), of a node lost mid-run and of API server restarts, and the soak. up.sh starts them with the settings of lib.sh's
# second profile (KUBEPLAY_SECOND_CLUSTER=1) inside:
#   * a network namespace, kubeplay-c2, on the first cluster's bridge by a veth pair
#     (kp-c2h on kubeplay0, kp-c2n with 10.250.0.2/24 in the netns): the node's bridge,
#     pods (10.251.0.0/24) and ports are its own; the API server listens on all of the
#     netns' addresses, so the host reaches it at https://10.250.0.2:16443 and pods at
#     https://10.251.0.1:16443 (there is no kube-proxy: a pod that needs the API server is
#     given KUBERNETES_SERVICE_HOST=10.251.0.1 and KUBERNETES_SERVICE_PORT=16443);
#   * a mount namespace, with a sysfs of the netns and tmpfs over the host paths the kubelet
#     and containerd hard-code, which go with the last of its processes.
# Its state is /var/lib/kubeplay-testcluster2 (KUBEPLAY_CLUSTER2_DIR), its kubeconfig
# <cache>/testcluster/kubeconfig2, its cgroups /sys/fs/cgroup/*/kubeplay2. down stops it by
# PID, as down.sh does, then removes the veth, the netns, the cgroups and the kubeconfig.
set -euo pipefail
TC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export KUBEPLAY_SECOND_CLUSTER=1
# shellcheck source=lib.sh
source "$TC/lib.sh"

usage() { echo "usage: cluster2.sh up | down [--purge] | kubelet stop|start | restart COMPONENT" >&2; exit 2; }
[ $# -ge 1 ] || usage
require_root

# ns_pid: a process of the second cluster, whose namespaces the scripts enter.
ns_pid() {
  local c p
  for c in etcd kube-apiserver containerd kubelet kube-controller-manager kube-scheduler; do
    p=$(pids_of "$c" | head -n 1)
    if [ -n "$p" ]; then echo "$p"; return 0; fi
  done
  return 1
}

# in_cluster2 cmd...: run cmd in the second cluster's network and mount namespaces.
in_cluster2() {
  local pid
  if pid=$(ns_pid); then
    nsenter -t "$pid" -m -n env KUBEPLAY_SECOND_CLUSTER=1 "$@"
    return
  fi
  # None runs: a fresh mount namespace in the netns. Its sysfs must be the netns' (the CNI
  # bridge plugin sets hairpin mode there); the cgroup tree is carried over it.
  nsenter --net="/run/netns/$C2_NETNS" unshare -m --propagation private env KUBEPLAY_SECOND_CLUSTER=1 \
    bash -euo pipefail -c '
      mnt=$(mktemp -d /run/kubeplay-c2-cgroup.XXXXXX)
      mount --rbind /sys/fs/cgroup "$mnt"
      mount -t sysfs sysfs /sys
      mount --move "$mnt" /sys/fs/cgroup
      rmdir "$mnt"
      for d in /run/containerd /run/netns /var/lib/cni /var/lib/kubelet /var/log/containers; do
        mkdir -p "$d" && mount -t tmpfs -o mode=0755 tmpfs "$d"
      done
      exec "$@"' in_cluster2 "$@"
}

network_up() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || die "the first cluster's bridge $BRIDGE is missing"
  [ -e "/run/netns/$C2_NETNS" ] || { ip netns add "$C2_NETNS"; log "created netns $C2_NETNS"; }
  if ! ip link show "${C2_VETH}h" >/dev/null 2>&1; then
    ip link add "${C2_VETH}h" type veth peer name "${C2_VETH}n" netns "$C2_NETNS"
    ip -n "$C2_NETNS" addr add "$C2_HOST_IP/24" dev "${C2_VETH}n"
    ip -n "$C2_NETNS" link set "${C2_VETH}n" up
    ip -n "$C2_NETNS" link set lo up
    log "created veth ${C2_VETH}h/${C2_VETH}n ($C2_HOST_IP)"
  fi
  # up.sh of the first cluster recreates its bridge when it restarts: join it again.
  ip link set "${C2_VETH}h" master "$BRIDGE" up
}

case "$1" in
  up)
    S=${EPOCHREALTIME/./}
    env -u KUBEPLAY_SECOND_CLUSTER "$TC/up.sh" >/dev/null   # the bridge is the first cluster's
    network_up
    # The kubelet wants its cgroupRoot to exist.
    for d in /sys/fs/cgroup/*/; do
      [ -e "$d/cgroup.procs" ] && mkdir -p "$d${CGROUP_ROOT#/}"
    done
    in_cluster2 "$TC/up.sh"
    log "second cluster up in $(elapsed "$S")s; kubeconfig: $CACHE_KUBECONFIG"
    ;;
  down)
    shift
    if ns_pid >/dev/null || [ -d "$STATE" ]; then
      if ns_pid >/dev/null || [ -e "/run/netns/$C2_NETNS" ]; then
        in_cluster2 "$TC/down.sh" "$@"
      elif [ "${1:-}" = --purge ]; then
        rm -rf "${STATE:?}"
      fi
    fi
    if ip link show "${C2_VETH}h" >/dev/null 2>&1; then ip link del "${C2_VETH}h" && log "deleted veth ${C2_VETH}h"; fi
    if [ -e "/run/netns/$C2_NETNS" ]; then ip netns del "$C2_NETNS" && log "deleted netns $C2_NETNS"; fi
    for d in /sys/fs/cgroup/*"$CGROUP_ROOT"; do
      [ -d "$d" ] && { rmdir "$d" 2>/dev/null || warn "cgroup not empty, left: $d"; }
    done
    # Always: without the bridge, the route to its server (10.250.0.2) is the default one,
    # off this machine; up writes it again.
    rm -f "$CACHE_KUBECONFIG"
    ;;
  kubelet)
    [ $# = 2 ] || usage
    ns_pid >/dev/null || die "the second cluster is not running: cluster2.sh up"
    in_cluster2 "$TC/kubelet.sh" "$2"
    ;;
  restart)
    # restart.sh inside its namespaces: a control plane component killed and started again
    # (the soak's and the API server restart tests').
    [ $# = 2 ] || usage
    ns_pid >/dev/null || die "the second cluster is not running: cluster2.sh up"
    in_cluster2 "$TC/restart.sh" "$2"
    ;;
  *) usage ;;
esac
