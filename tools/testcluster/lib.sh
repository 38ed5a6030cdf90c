# shellcheck shell=bash
# shellcheck disable=SC2034  # settings used by the scripts sourcing this file
# lib.sh - shared settings and helpers of the local test cluster harness.
# Sourced by build.sh, up.sh and down.sh; not meant to be executed.
#
# Layout
#   <cache>   = ${KUBEPLAY_CACHE_DIR:-<repo>/.cache}/testcluster   (per clone; build outputs)
#     bin/      etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet (the
#               default version; k8s-<v>/ those of another),
#               kubeplay-cri, kubeplay-pause
#     img/      ee.tar, pause.tar (docker-archive image tarballs)
#     kubeconfig  copy of the admin kubeconfig of the running cluster
#   <state>   = ${KUBEPLAY_CLUSTER_DIR:-/var/lib/kubeplay-testcluster}   (machine-wide)
#     Ports, the bridge, cgroups and the hard-coded host paths below are machine-wide, so the
#     runtime state is too: a fresh clone (CI) finds and recovers a cluster an earlier, killed
#     session started.
#     lock            flock(1) lock held by up.sh / down.sh for their whole run
#     pki/ etc/       certificates, keys, kubeconfigs, containerd/kubelet/CNI configs
#     etcd/           etcd data (etcd-<v>/ for each other Kubernetes version);  containerd/
#                     containerd root (images);  kubelet/ kubelet root
#     run/            pid files, containerd state + socket, runc root
#     logs/           one log per component (previous run's log kept as *.log.1)
#     kubeconfig      admin kubeconfig (client certificate in group system:masters)
#     quickstart.tfstate  the state of make quickstart (its objects live in this cluster)
#
# Host paths the tools hard-code (down.sh --purge removes only our entries, and the
# directories only when up.sh created them and they are empty):
#   /run/containerd/s/<hash>                 shim sockets (containerd 1.6)
#   /run/netns/cni-<uuid>                    pod network namespaces (containerd CRI)
#   /var/lib/cni/results/kubeplay-net-*      libcni result cache
#   /var/lib/kubelet/device-plugins/kubelet.sock
#   /var/log/containers/*.log                kubelet symlinks into <state>/pod-logs
#   /sys/fs/cgroup/*/kubepods                pod cgroups (kubelet, cgroupfs driver)

set -euo pipefail
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
# Everything here talks to 127.0.0.1 or to the harness' own bridge: never via a proxy.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

TC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$TC_DIR/../.." && pwd)
CACHE=${KUBEPLAY_CACHE_DIR:-$REPO_ROOT/.cache}/testcluster
BIN=$CACHE/bin
IMG=$CACHE/img
STATE=${KUBEPLAY_CLUSTER_DIR:-/var/lib/kubeplay-testcluster}
STATE=${STATE%/}

# The Kubernetes version: KUBEPLAY_K8S_VERSION picks one of K8S_VERSIONS (make test-matrix runs
# each). The default's components build from module kubernetes/ into bin/, every other's from
# kubernetes-versions/<v>/ (kubernetes-versions/gen.sh writes it) into k8s-<v>/, and each keeps
# an etcd data directory of its own (etcd/ for the default, etcd-<v>/ else): a cluster started
# at another version starts from its own data, and the default's objects are there again when
# it comes back. One version runs at a time (same ports): up.sh restarts at the version asked.
K8S_DEFAULT_VERSION=v1.32.4
K8S_VERSIONS="v1.30.14 v1.32.4 v1.37.2"
K8S_VERSION=${KUBEPLAY_K8S_VERSION:-$K8S_DEFAULT_VERSION}
case " $K8S_VERSIONS " in
*" $K8S_VERSION "*) ;;
*) echo "KUBEPLAY_K8S_VERSION=$K8S_VERSION: the test cluster builds one of $K8S_VERSIONS" >&2; exit 2 ;;
esac
K8S_MINOR=${K8S_VERSION#v1.}
K8S_MINOR=${K8S_MINOR%%.*}
if [ "$K8S_VERSION" = "$K8S_DEFAULT_VERSION" ]; then
  K8S_MODULE=$TC_DIR/kubernetes
  K8S_BIN=$BIN
  ETCD_DATA_NAME=etcd
else
  K8S_MODULE=$TC_DIR/kubernetes-versions/$K8S_VERSION
  K8S_BIN=$CACHE/k8s-$K8S_VERSION
  ETCD_DATA_NAME=etcd-$K8S_VERSION
fi
ETCD_VERSION=3.5.17

# Network: the kubelet refuses loopback node IPs, so the harness owns a bridge with a
# private /24; it is the node IP, the kubelet's serving address and the CNI bridge/gateway.
BRIDGE=kubeplay0
# A bridge whose address nobody set takes the lowest of its ports' addresses, so it changed as
# pods' veths came and went; the second cluster's netns, which reaches the host through it
# (kp-c2h), kept sending to the old one until its ARP entry went stale: its API server's
# replies were lost for up to 45 s. A set address never changes.
BRIDGE_MAC=02:6b:70:00:01:01
NODE_IP=10.250.0.1
POD_SUBNET=10.250.0.0/24
POD_NET_PREFIX=10.250.0.
POD_RANGE_START=16             # pods from .16; .2 to .15 are the harness' (C2_HOST_IP)
CNI_NET=kubeplay-net
NODE_NAME=kubeplay-node
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1

ETCD_PORT=23790
ETCD_PEER_PORT=23800
APISERVER_PORT=16443
KCM_PORT=10257
SCHED_PORT=10259
KUBELET_PORT=10350
KUBELET_HEALTHZ_PORT=10348
ALL_PORTS="$ETCD_PORT $ETCD_PEER_PORT $APISERVER_PORT $KCM_PORT $SCHED_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT"

EE_IMAGE=kubeplay.test/ee:v1
PAUSE_IMAGE=kubeplay.test/pause:v1
# The ee image's Debian packages (build.sh). python3-cffi-backend must be named: debootstrap's
# resolver ignores virtual packages (python3-cffi-backend-api-min), and python3-cryptography
# then fails to configure. One image serves both sides of the SSH tests: a superset keeps
# every earlier test working and the cluster imports one image instead of two. libnss-wrapper
# gives a run pod's arbitrary UID (no entry in /etc/passwd) one that ssh accepts.
EE_PACKAGES=python3,ansible-core,python3-cffi-backend,openssh-client,openssh-server,libnss-wrapper

# Components in start order.  Their pid files are $RUN/<name>.pid, their logs $LOGS/<name>.log.
COMPONENTS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet"
K8S_BINARIES="kube-apiserver kube-controller-manager kube-scheduler kubelet"

# The second cluster (cluster2.sh): a control plane and a node of their own, in a network
# namespace and a mount namespace of their own, so that ports, the bridge's name and the
# paths the kubelet and containerd hard-code stay as above inside them. What they share
# with the host (the state dir, the CNI result cache, cgroups) gets names of its own.
CGROUP_ROOT=""                 # the kubelet's cgroupRoot ("" = /)
KUBELET_V=1                    # the kubelet's log level
NODE_LABELS=""                 # the kubelet's --node-labels
APISERVER_BIND=127.0.0.1
APISERVER_EXTRA_SANS=""
KUBECONFIG_SERVER=""           # the cached kubeconfig's server, when not 127.0.0.1
KUBECONFIG_NAME=kubeconfig
C2_NETNS=kubeplay-c2           # cluster2.sh: its network namespace,
C2_VETH=kp-c2                  # the veth pair kp-c2h (on $BRIDGE) / kp-c2n (in the netns),
C2_HOST_IP=10.250.0.2          # and the address that serves its API server on $BRIDGE
if [ "${KUBEPLAY_SECOND_CLUSTER:-}" = 1 ]; then
  STATE=${KUBEPLAY_CLUSTER2_DIR:-/var/lib/kubeplay-testcluster2}
  STATE=${STATE%/}
  BRIDGE_MAC=02:6b:70:00:02:01
  # Its few pods' exec requests and status updates logged (V(3)), for the rare exec that its
  # kubelet refused with "container not found" for 45 s while containerd ran the container.
  KUBELET_V=3
  NODE_IP=10.251.0.1
  POD_SUBNET=10.251.0.0/24
  POD_NET_PREFIX=10.251.0.
  CNI_NET=kubeplay-net2
  NODE_NAME=kubeplay-node2
  CGROUP_ROOT=/kubeplay2
  NODE_LABELS=kubeplay.test/node=two
  # Only inside its own netns: reachable on lo, on its node's bridge (pods) and on the veth.
  APISERVER_BIND=0.0.0.0
  APISERVER_EXTRA_SANS=",IP:$C2_HOST_IP,IP:$NODE_IP"
  KUBECONFIG_SERVER=https://$C2_HOST_IP:$APISERVER_PORT
  KUBECONFIG_NAME=kubeconfig2
fi

PKI=$STATE/pki
ETCD_DATA=$STATE/$ETCD_DATA_NAME
ETC=$STATE/etc
RUN=$STATE/run
LOGS=$STATE/logs
SOCK=$RUN/containerd/containerd.sock
ADMIN_KUBECONFIG=$STATE/kubeconfig
CACHE_KUBECONFIG=$CACHE/$KUBECONFIG_NAME
# Host directories the tools hard-code; up.sh records the ones it had to create.
HOST_PATHS="/run/containerd /run/netns /var/lib/cni /var/lib/cni/results /var/lib/kubelet /var/lib/kubelet/device-plugins /var/log/containers"
HOST_PATHS_RECORD=$STATE/host-paths.created

T0=${EPOCHREALTIME/./}
# elapsed [since_us]: seconds since T0 (or since the given microsecond timestamp), 0.01 precision
elapsed() {
  local d=$(( ${EPOCHREALTIME/./} - ${1:-$T0} ))
  printf '%d.%02d' $(( d / 1000000 )) $(( d % 1000000 / 10000 ))
}
log() { printf '[%6ss] %s\n' "$(elapsed)" "$*"; }
warn() { printf '[%6ss] WARNING: %s\n' "$(elapsed)" "$*" >&2; }
die() { printf '[%6ss] ERROR: %s\n' "$(elapsed)" "$*" >&2; exit 1; }
# timed description cmd...: run cmd, then print how long it took
timed() {
  local what=$1 s=${EPOCHREALTIME/./}; shift
  "$@"
  log "$what: $(elapsed "$s")s"
}

require_root() { [ "$(id -u)" = 0 ] || die "must run as root (containers, cgroups, mounts, bridge)"; }

# The state dir may be rm -rf'ed by down.sh --purge: refuse anything that does not look
# like a dedicated absolute path.
check_state_dir() {
  case "$STATE" in
    /?*/?*) ;;
    *) die "KUBEPLAY_CLUSTER_DIR=$STATE: want an absolute path at least two levels deep" ;;
  esac
  [[ "$STATE" =~ ^[A-Za-z0-9._/-]+$ ]] || die "KUBEPLAY_CLUSTER_DIR=$STATE: only [A-Za-z0-9._/-] allowed"
  case "$STATE" in /usr|/usr/*|/etc|/etc/*|/var/lib|/home|/root|/bin|/sbin|/lib|/lib64|/proc/*|/sys/*|/dev/*)
    die "KUBEPLAY_CLUSTER_DIR=$STATE: refusing a system directory" ;; esac
  [ ${#SOCK} -lt 100 ] || die "KUBEPLAY_CLUSTER_DIR=$STATE is too long for a unix socket path"
  if [ -d "$STATE" ] && [ -n "$(ls -A "$STATE" 2>/dev/null)" ] && [ ! -e "$STATE/.kubeplay-testcluster" ]; then
    die "$STATE exists, is not empty and was not created by this harness"
  fi
}

# lock_state: take the exclusive machine-wide lock (fd 9) for the rest of the script.
# down.sh --purge deletes the lock file while holding it, so after acquiring, check that
# the locked inode is still the one at the path; otherwise lock the new file.
lock_state() {
  local waited=0
  while :; do
    mkdir -p "$STATE"
    touch "$STATE/.kubeplay-testcluster"
    exec 9>>"$STATE/lock"
    if ! flock -n 9; then
      [ $waited = 1 ] || log "waiting for the lock $STATE/lock (another up.sh/down.sh is running)"
      waited=1
      flock 9
    fi
    if [ "$(stat -c %d:%i "$STATE/lock" 2>/dev/null)" = "$(stat -L -c %d:%i /proc/$$/fd/9)" ]; then
      return 0
    fi
    exec 9>&-
  done
}

# cmdline_of pid: the process' argv joined by spaces ("" if gone)
cmdline_of() { { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null || true; }

# is_ours name pid: pid is alive, its argv[0] is the component's binary and its command
# line references our state dir.  Nothing else is ever signalled.
is_ours() {
  local name=$1 pid=$2 cmd
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  cmd=$(cmdline_of "$pid")
  [ -n "$cmd" ] || return 1
  local argv0=${cmd%% *}
  [ "${argv0##*/}" = "$name" ] || return 1
  [[ "$cmd" == *"$STATE/"* ]]
}

# pids_of name: pids of our instances of a component: the one in its pid file plus any
# other process that passes is_ours (e.g. started by an up.sh killed before it wrote the
# pid file).
pids_of() {
  local name=$1 pid p comm
  pid=$(cat "$RUN/$name.pid" 2>/dev/null || true)
  if is_ours "$name" "$pid"; then echo "$pid"; fi
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = "$pid" ] && continue
    # cheap pre-filter before reading the whole cmdline
    { read -r comm < "/proc/$p/comm"; } 2>/dev/null || continue
    [ "$comm" = "${name:0:15}" ] || continue
    if is_ours "$name" "$p"; then echo "$p"; fi
  done
}

# running name: the pid in the component's pid file, if it is alive and ours
running() {
  local pid
  pid=$(cat "$RUN/$1.pid" 2>/dev/null || true)
  if is_ours "$1" "$pid"; then echo "$pid"; fi
}

# stop_components name...: SIGTERM every instance of the named components, wait up to 15s,
# then SIGKILL what is left.  Removes their pid files.
stop_components() {
  local name pid pids="" deadline
  for name in "$@"; do
    for pid in $(pids_of "$name"); do
      kill -TERM "$pid" 2>/dev/null && pids="$pids $name:$pid"
    done
  done
  deadline=$(( ${EPOCHREALTIME/./} + 15000000 ))
  for entry in $pids; do
    name=${entry%%:*}; pid=${entry#*:}
    while [ -d "/proc/$pid" ] && [ "${EPOCHREALTIME/./}" -lt $deadline ]; do
      # a zombie child of ours counts as stopped
      [ "$({ awk '{print $3}' "/proc/$pid/stat"; } 2>/dev/null)" = Z ] && break
      sleep 0.05
    done
    if is_ours "$name" "$pid"; then
      warn "$name ($pid) ignored SIGTERM for 15s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name ($pid)"
  done
  for name in "$@"; do rm -f "$RUN/$name.pid"; done
}

# our_shims: pids of containerd shims serving our containerd (their -address is our socket)
our_shims() {
  local p cmd comm
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    { read -r comm < "/proc/$p/comm"; } 2>/dev/null || continue
    case "$comm" in containerd-shim*) ;; *) continue ;; esac
    cmd=$(cmdline_of "$p")
    [[ "$cmd" == *" -address $SOCK"* ]] && echo "$p"
  done
  return 0
}

# kubepods_cgroups_ours: the kubepods cgroups were created by our kubelet (see up.sh), so
# processes left in them after our kubelet and shims are gone are our containers.
kubepods_cgroups_ours() { [ -e "$STATE/kubepods.ours" ]; }

kubepods_dirs() { ls -d /sys/fs/cgroup/*"$CGROUP_ROOT"/kubepods 2>/dev/null || true; }

# start_daemon name cmd...: start a component in its own session, detached from our
# stdio (a caller capturing up.sh's output must not wait for the daemons) and without the
# lock fd; record its pid.
start_daemon() {
  local name=$1 pid; shift
  [ -f "$LOGS/$name.log" ] && mv -f "$LOGS/$name.log" "$LOGS/$name.log.1"
  # At nice 0 whoever starts it (a niced shell, or the first test that needs the second cluster),
  # for kernels without autogroups; with them, its session of its own weighs as any other.
  setsid nice -n "$((-$(nice)))" "$@" </dev/null >"$LOGS/$name.log" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$RUN/$name.pid"
  # setsid execs in place when the shell's child is not a process group leader (no job
  # control here); make sure the recorded pid really is the component. On a loaded
  # machine (a load average of 10 on 2 cores) the exec took over 0.2 s: wait up to 10 s
  # while the process lives.
  local i
  for i in $(seq 500); do
    is_ours "$name" "$pid" && return 0
    [ -d "/proc/$pid" ] || break
    sleep 0.02
  done
  is_ours "$name" "$pid" && return 0
  tail -n 20 "$LOGS/$name.log" >&2 || true
  warn "$name did not start (pid $pid)"
  return 1
}

# wait_until description timeout_s logname cmd...: poll cmd every 0.1s; on timeout show
# the tail of the component's log and fail.
wait_until() {
  local what=$1 timeout=$2 logname=$3; shift 3
  local deadline=$(( ${EPOCHREALTIME/./} + timeout * 1000000 ))
  until "$@" >/dev/null 2>&1; do
    if [ "${EPOCHREALTIME/./}" -ge $deadline ]; then
      if [ -n "$logname" ] && [ -f "$LOGS/$logname.log" ]; then
        echo "---- last lines of $LOGS/$logname.log" >&2
        tail -n 30 "$LOGS/$logname.log" >&2
      fi
      die "timeout after ${timeout}s waiting for $what"
    fi
    if [ -n "$logname" ] && [ -z "$(running "$logname")" ]; then
      echo "---- last lines of $LOGS/$logname.log" >&2
      tail -n 30 "$LOGS/$logname.log" >&2 || true
      die "$logname exited while waiting for $what"
    fi
    sleep 0.1
  done
}

# port_closed port: nothing listens on the TCP port.
port_closed() { [ -z "$(ss -Htln "sport = :$1")" ]; }

# The commands the harness runs beyond coreutils, util-linux and bash, each with the Debian
# package that has it. kubectl, python3 and jq are not among them.
REQUIRED_COMMANDS="curl:curl ip:iproute2 ss:iproute2 openssl:openssl flock:util-linux
nsenter:util-linux awk:mawk tar:tar sha256sum:coreutils debootstrap:debootstrap containerd:containerd
runc:runc ctr:containerd"

# require_commands: stop at once, naming the first command of REQUIRED_COMMANDS not on PATH.
require_commands() {
  local pair
  for pair in $REQUIRED_COMMANDS; do
    command -v "${pair%%:*}" >/dev/null 2>&1 ||
      die "${pair%%:*} is not on PATH: the test cluster needs it. Install it (Debian: apt-get install ${pair#*:}; build.sh installs its packages when run as root) or add its directory to PATH"
  done
}

# api_get path: GET an API server path as the admin, compact JSON on stdout (curl only: the
# harness needs no kubectl; a user agent other than curl's turns off pretty printing).
api_get() {
  curl -fsS --max-time 10 -A kubeplay-testcluster --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
    --key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT$1"
}

apiserver_ready() { api_get /readyz >/dev/null 2>&1; }

# node_ready [since]: the Node's Ready condition is True (and, if given, was last reported
# by the kubelet at or after `since`, an RFC 3339 UTC timestamp: a restarted kubelet must
# report afresh, the status stored in etcd may be stale).
node_ready() {
  local out status hb
  # NodeCondition's JSON keeps its fields in the order of the Go struct: type, status,
  # lastHeartbeatTime.
  out=$(api_get "/api/v1/nodes/$NODE_NAME" 2>/dev/null |
    sed -n 's/.*{"type":"Ready","status":"\([A-Za-z]*\)","lastHeartbeatTime":"\([^"]*\)".*/\1 \2/p') || return 1
  status=${out%% *}; hb=${out#* }
  [ "$status" = True ] || return 1
  [ -z "${1:-}" ] || [[ ! "$hb" < "$1" ]]
}

# ---------------------------------------------------------------- teardown
# teardown: stop everything of ours and clean the host, keeping the state (PKI, etcd data,
# images).  Used by down.sh and by up.sh before it restarts an unhealthy cluster.
teardown() {
  # 1. kubelet first, so that it does not restart the containers removed below.
  stop_components kubelet
  # 2. pod sandboxes through CRI: StopPodSandbox kills the containers and runs CNI DEL
  #    (veth, IP, netns), RemovePodSandbox deletes them.  Stopping containerd alone would
  #    leave shims and containers running.  If containerd is gone but containers are left
  #    (e.g. after kill -9), start it once more: it reconnects to the surviving shims.
  local tasks=$RUN/containerd/io.containerd.runtime.v2.task/k8s.io started_tmp=0 cpid
  cpid=$(running containerd)
  if [ -z "$cpid" ]; then   # an instance of ours without (valid) pid file?
    cpid=$(pids_of containerd | head -n 1) || true
    [ -z "$cpid" ] || echo "$cpid" > "$RUN/containerd.pid"
  fi
  if [ -z "$cpid" ] && [ -f "$ETC/containerd.toml" ] &&
     { [ -n "$(ls -A "$tasks" 2>/dev/null)" ] || [ -n "$(our_shims)" ]; }; then
    mkdir -p "$LOGS" "$RUN"
    log "containerd is down but containers are left: starting it to remove them"
    if start_daemon containerd containerd --config "$ETC/containerd.toml"; then
      started_tmp=1
      local _
      for _ in $(seq 1 100); do ctr --address "$SOCK" version >/dev/null 2>&1 && break; sleep 0.1; done
    fi
  fi
  if [ -n "$(running containerd)" ] && [ -x "$BIN/kubeplay-cri" ]; then
    local s=${EPOCHREALTIME/./} out
    if out=$("$BIN/kubeplay-cri" -r "$SOCK" rmp-all 2>&1); then
      [ -z "$out" ] || log "removed pod sandboxes ($(elapsed "$s")s):"$'\n'"    ${out//$'\n'/$'\n'    }"
    else
      warn "kubeplay-cri rmp-all failed: $out"
    fi
  fi
  [ $started_tmp = 0 ] || log "stopping the temporary containerd"
  stop_components containerd
  # 3. the control plane
  stop_components kube-scheduler kube-controller-manager kube-apiserver etcd
  # 4. shims containerd did not clean up (their containers are gone or orphaned)
  local p
  for p in $(our_shims); do kill -KILL "$p" 2>/dev/null && log "killed leftover shim $p"; done
  # 5. container processes orphaned by killed shims (only in kubepods cgroups our kubelet made)
  if kubepods_cgroups_ours; then
    local left
    left=$(find /sys/fs/cgroup/*"$CGROUP_ROOT"/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un | tr '\n' ' ') || true
    for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
    [ -z "$left" ] || { log "killed leftover container processes: $left"; sleep 0.2; }
  fi
  # 6. mounts under the state dir (overlay rootfs, sandbox shm, kubelet volumes), deepest first
  unmount_state
  # 7. our pod network namespaces (their eth0 is in our pod subnet), then the bridge
  local ns
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    if nsenter --net="$ns" ip -4 -o addr show 2>/dev/null | grep -q " inet ${POD_NET_PREFIX//./\\.}"; then
      umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
      rm -f "$ns" && log "deleted netns $ns"
    fi
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE" && log "deleted bridge $BRIDGE"; fi
  # 8. empty pod cgroups (the kubelet recreates them)
  local d
  for d in $(kubepods_dirs); do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
  for d in $(kubepods_dirs); do warn "cgroup not empty, left: $d"; done
  # 9. per-run leftovers: IP reservations, libcni cache, kubelet log symlinks into our dir
  rm -rf "${STATE:?}/cni-ipam"
  rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
  find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
  # 10. ip_forward (the CNI bridge plugin's isGateway sets it to 1)
  if [ -s "$STATE/ip_forward.orig" ]; then
    if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$(cat "$STATE/ip_forward.orig")" ]; then
      cat "$STATE/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward
      log "restored net.ipv4.ip_forward=$(cat "$STATE/ip_forward.orig")"
    fi
    rm -f "$STATE/ip_forward.orig"
  fi
}

unmount_state() {
  local pass m
  for pass in 1 2 3; do
    local mounts
    mounts=$(awk -v d="$STATE/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -ru)
    [ -n "$mounts" ] || return 0
    while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done <<<"$mounts"
    log "unmounted $(wc -l <<<"$mounts") mount(s) under $STATE (pass $pass)"
  done
  if awk -v d="$STATE/" 'index($5, d) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
    warn "mounts left under $STATE"
    return 1
  fi
}
