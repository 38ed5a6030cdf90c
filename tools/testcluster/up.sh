#!/usr/bin/env bash
# up.sh - start (or find, or repair) the local single-node Kubernetes test cluster:
# etcd 3.5 + kube-apiserver + kube-controller-manager + kube-scheduler (v1.32.4, or
# KUBEPLAY_K8S_VERSION: see lib.sh) on
# 127.0.0.1, and a real node: kubelet + containerd + runc, pods on the bridge kubeplay0.
#
#   tools/testcluster/up.sh        -> <cache>/testcluster/kubeconfig (admin, system:masters)
#
# Idempotent and safe to run from several processes at once (exclusive flock on
# <state>/lock for the whole run):
#   * healthy cluster recorded in the state dir (all processes ours and alive, apiserver
#     /readyz, node Ready): rewrite the kubeconfig, exit 0 (a fraction of a second);
#   * anything else: tear down what is left (same as down.sh, keeping PKI, etcd data and
#     images), then start everything.
# Builds (build.sh) first when a binary or image is missing.
# See lib.sh for the directory layout and the host paths involved; down.sh undoes it all.
#
# Machine-specific workarounds (see tools/testcluster/README.md):
#   * no CAP_SYS_RESOURCE: CRI restrict_oom_score_adj = true, kubelet oomScoreAdj: 0
#   * cgroup v1 (hybrid): kubelet failCgroupV1: false, cgroupfs driver; runc, not crun
#   * apiserver on 127.0.0.1: --endpoint-reconciler-type=none (127.0.0.1 is not a valid
#     Endpoints IP), --kubelet-preferred-address-types=InternalIP
#   * nothing may address another host: no iptables rules (makeIPTablesUtilChains: false,
#     CNI ipMasq: false), and image pulls from kubeplay.test go to 127.0.0.1:1 (refused).
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set +m   # no job control: background children stay in our process group (see start_daemon)

require_root
# A fresh machine may lack a package the harness runs: build.sh installs them (as root).
require_commands 2>/dev/null || "$TC_DIR/build.sh" packages
check_state_dir
lock_state

# ---------------------------------------------------------------- helpers
write_cache_kubeconfig() {
  mkdir -p "$CACHE"
  install -m 600 "$ADMIN_KUBECONFIG" "$CACHE_KUBECONFIG.tmp.$$"
  if [ -n "$KUBECONFIG_SERVER" ]; then
    sed -i "s|server: https://127.0.0.1:$APISERVER_PORT|server: $KUBECONFIG_SERVER|" "$CACHE_KUBECONFIG.tmp.$$"
  fi
  mv -f "$CACHE_KUBECONFIG.tmp.$$" "$CACHE_KUBECONFIG"
}

healthy() {
  local c
  for c in $COMPONENTS; do [ -n "$(running "$c")" ] || return 1; done
  [ -s "$ADMIN_KUBECONFIG" ] || return 1
  apiserver_ready || return 1
  # built from the same sources? (a clone with another pinned version restarts it)
  curl -fsS --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/version" 2>/dev/null | grep -q "\"gitVersion\": \"$K8S_VERSION\"" || return 1
  # with the ee image of the same packages? (the image is imported when the cluster starts)
  [ "$(cat "$IMG/ee.pkgs" 2>/dev/null)" = "$EE_PACKAGES" ] || return 1
  # with the scheduler's configuration? (a cluster started before it had none)
  [[ "$(cmdline_of "$(running kube-scheduler)")" == *"--config=$ETC/kube-scheduler-config.yaml"* ]] || return 1
  # with a bridge whose address is set? (one started before took its ports' lowest)
  [ "$(cat "/sys/class/net/$BRIDGE/address" 2>/dev/null)" = "$BRIDGE_MAC" ] || return 1
  node_ready ""
}

# import_images imports each image of ours that containerd lacks, or whose tarball changed
# (size, mtime, path) since it was imported.
import_images() {
  local images pair name file stamp s
  images=$(ctr --address "$SOCK" -n k8s.io images ls -q) || return 1
  for pair in "$PAUSE_IMAGE=pause.tar" "$EE_IMAGE=ee.tar"; do
    name=${pair%%=*} file=$IMG/${pair#*=}
    stamp="$(stat -c '%s %Y' "$file") $file"
    if [ "$(cat "$STATE/imported.${pair#*=}" 2>/dev/null)" != "$stamp" ] || ! grep -qxF "$name" <<<"$images"; then
      s=${EPOCHREALTIME/./}
      ctr --address "$SOCK" -n k8s.io images import "$file" >/dev/null || die "cannot import $file"
      echo "$stamp" > "$STATE/imported.${pair#*=}"
      log "imported $name ($(elapsed "$s")s)"
    fi
  done
}

if healthy; then
  # The kubelet's image GC (a disk filled beyond imageGCHighThresholdPercent) or a test may have
  # removed an image of ours, which no registry serves: put it back.
  import_images
  write_cache_kubeconfig
  log "cluster already up and healthy; kubeconfig: $CACHE_KUBECONFIG"
  exit 0
fi

# ---------------------------------------------------------------- build, recover
for f in etcd kubeplay-cri; do
  [ -x "$BIN/$f" ] || NEED_BUILD=1
done
for f in $K8S_BINARIES; do
  "$K8S_BIN/$f" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION" || NEED_BUILD=1
done
[ -s "$IMG/ee.tar" ] && [ -s "$IMG/pause.tar" ] || NEED_BUILD=1
[ "$(cat "$IMG/ee.pkgs" 2>/dev/null)" = "$EE_PACKAGES" ] || NEED_BUILD=1
if [ -n "${NEED_BUILD:-}" ]; then
  log "binaries or images missing or out of date: running build.sh"
  "$TC_DIR/build.sh"
fi

# Whatever is left of an earlier cluster (processes, shims, containers, mounts, netns,
# bridge, cgroups) goes; PKI, etcd data and imported images stay.
log "no healthy cluster in $STATE: cleaning up leftovers, then starting"
teardown
T_START=${EPOCHREALTIME/./}

mkdir -p "$PKI" "$ETC/cni/net.d" "$ETC/certs.d/kubeplay.test" "$RUN" "$LOGS" "$ETCD_DATA" \
  "$STATE/containerd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/cni-ipam"
chmod 700 "$ETCD_DATA" "$PKI"
# Before anything can change it (the CNI bridge plugin's isGateway sets it to 1); down.sh
# restores it.
[ -s "$STATE/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward > "$STATE/ip_forward.orig"

# Our ports must be free (we stopped everything of ours above).
busy=""
for port in $ALL_PORTS; do
  if [ -n "$(ss -Htln "sport = :$port" 2>/dev/null)" ]; then busy="$busy $port"; fi
done
if [ -n "$busy" ]; then
  busy=${busy# }
  ss -tlnp | grep -E ":(${busy// /|})\b" >&2 || true
  die "ports in use by another program: $busy"
fi

# ---------------------------------------------------------------- PKI
# One CA signs everything; ECDSA P-256 keys (generated in milliseconds, unlike RSA).
# Generated once and reused; a missing CA regenerates everything.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }
# cert name subject extendedKeyUsage [subjectAltName]
cert() {
  local name=$1 subj=$2 eku=$3 san=${4:-}
  [ -s "$PKI/$name.crt" ] && [ -s "$PKI/$name.key" ] && return 0
  new_key "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" 2>/dev/null |
    openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days 3650 -sha256 -out "$PKI/$name.crt" -extfile <(
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$eku"
        [ -z "$san" ] || echo "subjectAltName=$san"
      ) 2>/dev/null
}
if [ ! -s "$PKI/ca.crt" ] || [ ! -s "$PKI/ca.key" ]; then
  rm -f "$PKI"/*
  new_key "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=kubeplay-testcluster-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null
fi
cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local$APISERVER_EXTRA_SANS"
cert admin "/O=system:masters/CN=kubeplay-admin" clientAuth
# The apiserver's client certificate towards the kubelet (exec, logs): system:masters passes
# the kubelet's Webhook authorization.
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
# Bootstrap RBAC knows these user names.
cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
# Node authorizer + NodeRestriction: CN system:node:<name>, O system:nodes.
cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
if [ ! -s "$PKI/sa.key" ]; then   # ServiceAccount token signing key (TokenRequest)
  new_key "$PKI/sa.key"
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi

# kubeconfig file user: a kubeconfig with embedded certificates
kubeconfig() {
  local file=$1 user=$2
  umask 077
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kubeplay-testcluster
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 < "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 < "$PKI/$user.crt")
    client-key-data: $(base64 -w0 < "$PKI/$user.key")
contexts:
- name: kubeplay-testcluster
  context: {cluster: kubeplay-testcluster, user: $user}
current-context: kubeplay-testcluster
EOF
  umask 022
}
kubeconfig "$ADMIN_KUBECONFIG" admin
for u in kube-controller-manager kube-scheduler kubelet-client; do kubeconfig "$ETC/$u.kubeconfig" "$u"; done
log "pki and kubeconfigs ready"

# ---------------------------------------------------------------- configs
# containerd: private root/state/socket; CRI with our sandbox image, runc, cgroupfs,
# overlayfs, CNI config from our dir.  Streaming server (exec) on 127.0.0.1.
cat > "$ETC/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # This machine has no CAP_SYS_RESOURCE: nothing may lower oom_score_adj, and runc fails
  # every sandbox ("can't get final child's PID from pipe: EOF") when asked for -998.
  # Clamp negative values to containerd's own (0).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$RUN/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/certs.d"
EOF
# Pulls of kubeplay.test/* (images that were not imported) fail at once, locally, instead
# of asking DNS.  containerd 1.6 rejects a hosts.toml without a [host] table.
cat > "$ETC/certs.d/kubeplay.test/hosts.toml" <<EOF
server = "http://127.0.0.1:1"

[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
EOF
# CNI: our bridge as gateway, host-local IPAM.  ipMasq false: no iptables rules.  Pods get
# addresses from .$POD_RANGE_START: those below are the harness' own on the bridge (the
# second cluster's API server is $C2_HOST_IP), which a pod must never take.
cat > "$ETC/cni/net.d/10-kubeplay.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$STATE/cni-ipam",
               "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$NODE_IP", "rangeStart": "$POD_NET_PREFIX$POD_RANGE_START"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "loopback"}
  ]
}
EOF
# kubelet: x509 (our CA) + webhook authentication, Webhook authorization.
cat > "$ETC/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true, cacheTTL: 2m}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false          # cgroup v1 host: 1.32 only warns
failSwapOn: false
oomScoreAdj: 0               # the default -999 is refused: no CAP_SYS_RESOURCE
makeIPTablesUtilChains: false
podLogsDir: $STATE/pod-logs  # instead of /var/log/pods
volumePluginDir: $STATE/kubelet/volume-plugins
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local # no cluster DNS: ClusterFirst pods fall back to Default
maxPods: 50
serializeImagePulls: false
shutdownGracePeriod: 0s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
containerLogMaxSize: 10Mi
containerLogMaxFiles: 2
runtimeRequestTimeout: 2m
EOF
[ -z "$CGROUP_ROOT" ] || echo "cgroupRoot: $CGROUP_ROOT" >> "$ETC/kubelet-config.yaml"

# ---------------------------------------------------------------- etcd, kube-apiserver
# --unsafe-no-fsync: a throw-away test store; a killed process loses nothing (only a
# machine crash could), and fsync latency would slow every write.
# --election-timeout: a restarted single member waits that long before it elects itself
# (default 1s); there are no peers whose heartbeats could be late.
start_daemon etcd "$BIN/etcd" --name kubeplay --data-dir "$ETCD_DATA" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "kubeplay=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
  --quota-backend-bytes=$((2 * 1024 * 1024 * 1024)) --snapshot-count=10000 --unsafe-no-fsync \
  --heartbeat-interval=50 --election-timeout=300 \
  --logger=zap --log-level=warn || die "cannot start etcd"
wait_until "etcd health" 30 etcd curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
log "etcd healthy"

start_daemon kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address="$APISERVER_BIND" --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,NodeRestriction,DefaultStorageClass,ResourceQuota \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP \
  --endpoint-reconciler-type=none \
  --allow-privileged=true --profiling=false --v=1 || die "cannot start kube-apiserver"

# ---------------------------------------------------------------- containerd, images, bridge
# (in parallel with the apiserver's start-up)
if [ -z "$(kubepods_dirs)" ]; then
  touch "$STATE/kubepods.ours"    # our kubelet creates them: down.sh may clean them up
elif ! kubepods_cgroups_ours; then
  warn "kubepods cgroups exist and were not created by this harness (another kubelet?)"
fi
for p in $HOST_PATHS; do
  if [ ! -e "$p" ]; then
    mkdir -p "$p"
    grep -qxF "$p" "$HOST_PATHS_RECORD" 2>/dev/null || echo "$p" >> "$HOST_PATHS_RECORD"
  fi
done
# /run/netns as ip-netns(8) leaves it, a shared bind mount of itself, before a pod's network
# namespace is mounted there. `ip netns add` (cluster2.sh) makes that bind the first time it
# runs on a machine; made over the namespaces of pods already running, it hid their mounts
# from containerd, which could then never remove them (unlinkat: device or resource busy):
# on a fresh machine, the pods that ran when the second cluster started stayed Terminating
# for good, holding their CPU requests. Not over namespaces of others (left as they are).
if ! mountpoint -q /run/netns; then
  if awk '$5 ~ "^/run/netns/" {found = 1} END {exit !found}' /proc/self/mountinfo; then
    warn "network namespaces are mounted in /run/netns, which is no mount point: not bound over them;" \
      "a later ip netns add would hide them from containerd: unmount them (or stop what made them), then start the cluster again"
  else
    mount --bind /run/netns /run/netns && mount --make-shared /run/netns &&
      log "/run/netns bound over itself, shared (as ip netns makes it)"
  fi
fi
start_daemon containerd containerd --config "$ETC/containerd.toml" || die "cannot start containerd"
wait_until "containerd" 30 containerd ctr --address "$SOCK" version
log "containerd serving"
import_images

# The kubelet cannot use a loopback node IP: it gets our own bridge (also the CNI bridge).
ip link add "$BRIDGE" address "$BRIDGE_MAC" type bridge
ip addr add "$NODE_IP/${POD_SUBNET#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up

# ---------------------------------------------------------------- controllers, scheduler
wait_until "kube-apiserver /readyz" 120 kube-apiserver apiserver_ready
T_CP=$(elapsed "$T_START")
log "control plane ready (apiserver /readyz) after ${T_CP}s"
# --flex-volume-plugin-dir: its default, /usr/libexec/kubernetes/..., would be created.
# --kube-api-qps/burst: with --use-service-account-credentials each of ~35 controllers gets
# its own ServiceAccount token at start; at the default 20 QPS that alone takes ~5s.
start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig="$ETC/kube-controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
  --leader-elect=false --use-service-account-credentials=true --controllers='*' \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --flex-volume-plugin-dir="$STATE/kcm-volume-plugins" --kube-api-qps=200 --kube-api-burst=400 \
  --cluster-name=kubeplay --profiling=false --v=1 || die "cannot start kube-controller-manager"
# Pods that did not fit are tried again after at most 1 s (the default backs off to 10 s):
# while the suite's runs fill the node's CPU, a pod backing off lost every freed slot to
# pods created meanwhile and stayed Pending past its pod_pending_timeout (CI, 3 minutes;
# TestAccSchedulerFairness in internal/acctest).
cat > "$ETC/kube-scheduler-config.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $ETC/kube-scheduler.kubeconfig
leaderElection:
  leaderElect: false
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
EOF
start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" --config="$ETC/kube-scheduler-config.yaml" \
  --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" \
  --profiling=false --v=1 || die "cannot start kube-scheduler"

# ---------------------------------------------------------------- kubelet
KUBELET_SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T_KUBELET=${EPOCHREALTIME/./}
start_daemon kubelet "$K8S_BIN/kubelet" --config="$ETC/kubelet-config.yaml" \
  --kubeconfig="$ETC/kubelet-client.kubeconfig" --root-dir="$STATE/kubelet" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" ${NODE_LABELS:+--node-labels="$NODE_LABELS"} --v="$KUBELET_V" ||
  die "cannot start kubelet"
wait_until "kubelet healthz" 60 kubelet curl -fsS --max-time 2 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
wait_until "node $NODE_NAME Ready" 120 kubelet node_ready "$KUBELET_SINCE"
T_NODE=$(elapsed "$T_START")
log "node $NODE_NAME Ready after ${T_NODE}s ($(elapsed "$T_KUBELET")s after the kubelet started)"

# ---------------------------------------------------------------- the rest
# No taints left (not-ready / unreachable from an earlier run), else pods stay Pending.
no_taints() { local n; n=$(api_get "/api/v1/nodes/$NODE_NAME") && ! grep -q '"taints":' <<<"$n"; }
wait_until "node without taints" 60 kube-controller-manager no_taints
log "node has no taints"
wait_until "kube-controller-manager healthz" 60 kube-controller-manager \
  curl -kfsS --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz"
wait_until "kube-scheduler healthz" 60 kube-scheduler curl -kfsS --max-time 2 "https://127.0.0.1:$SCHED_PORT/healthz"
wait_until "ServiceAccount default/default" 60 kube-controller-manager api_get /api/v1/namespaces/default/serviceaccounts/default
log "controller-manager and scheduler healthy, ServiceAccount default/default exists"
write_cache_kubeconfig

rss_total=0 rss_list=""
for c in $COMPONENTS; do
  pid=$(running "$c")
  kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  rss_total=$((rss_total + kb)); rss_list="$rss_list $c=$((kb / 1024))"
done
log "cluster up in $(elapsed "$T_START")s (control plane ready ${T_CP}s, node Ready ${T_NODE}s)"
log "RSS $((rss_total / 1024)) MiB:$rss_list"
log "kubeconfig: $CACHE_KUBECONFIG (also $ADMIN_KUBECONFIG)"
