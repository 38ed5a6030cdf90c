#!/usr/bin/env bash
# build.sh - build everything the local test cluster needs.  Idempotent: every step is
# skipped when its output is already there (FORCE=1 rebuilds).  Needs only Debian's apt
# mirror and the Go module proxy.
#
#   1. Debian packages: containerd, runc, containernetworking-plugins, debootstrap, iproute2,
#      openssl, curl (apt-get update only when one is missing); then every command the
#      harness runs must be on PATH (require_commands). `build.sh packages` stops there.
#   2. <cache>/bin: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
#      (k8s.io/kubernetes v1.32.4, module tools/testcluster/kubernetes; rebuilt when
#      `--version` is not v1.32.4; KUBEPLAY_K8S_VERSION builds another version's into
#      <cache>/k8s-<v>, see lib.sh), kubeplay-cri, kubeplay-pause (static), etcd 3.5.17
#      (module tools/testcluster/etcd).
#   3. <cache>/img: docker-archive image tarballs made by mkimage.sh
#        pause.tar  kubeplay.test/pause:v1  only /pause (kubeplay-pause); the sandbox image
#        ee.tar     kubeplay.test/ee:v1     debootstrap --variant=minbase bookworm with python3,
#                                           ansible-core, openssh-client (Ansible's ssh
#                                           connection, ssh-agent) and openssh-server (the
#                                           SSH targets of the acceptance tests run sshd in
#                                           pods of this image); cmd /bin/sleep infinity.
#                                           Rebuilt when EE_PACKAGES changes (img/ee.pkgs).
#
# Environment: KUBEPLAY_CACHE_DIR (default <repo>/.cache), FORCE=1,
#              KUBEPLAY_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FORCE=${FORCE:-0}
MIRROR=${KUBEPLAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=$CACHE/build
mkdir -p "$BIN" "$IMG" "$WORK"

# Only one build at a time per cache dir (up.sh calls this under its own lock; people may
# run it by hand in parallel).
exec 8>>"$CACHE/build.lock"
flock 8

# to_log file cmd...: run cmd with its output in file
to_log() { local f=$1; shift; "$@" >"$f" 2>&1; }

# ---------------------------------------------------------------- 1. Debian packages
# `build.sh packages` stops after this step: make setup-quickstart runs it before its
# parallel builds, so that a machine that lacks something stops at once.
# ansible-core runs the stats callback on the host in internal/bundle's unit tests (TestStatsCallbackCheckMode);
# jq renders the CI examples' plan comment in TestAccRun_planCheckCI.
PKGS="containerd runc containernetworking-plugins debootstrap iproute2 openssl curl ansible-core jq"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || die "missing Debian packages:$missing (run as root to install them)"
  log "installing Debian packages:$missing"
  timed "apt-get update" apt-get update -qq
  # shellcheck disable=SC2086
  timed "apt-get install$missing" to_log "$WORK/apt.log" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $missing
fi
require_commands
[ "${1:-}" != packages ] || exit 0

# ---------------------------------------------------------------- 3a. the ee image
# EE_PACKAGES: see lib.sh (up.sh rebuilds and restarts when they change).

build_ee() {
  local rootfs=$WORK/ee-rootfs
  if [ "$FORCE" = 1 ] || [ ! -e "$rootfs/.complete" ] || [ "$(cat "$rootfs/.complete")" != "$EE_PACKAGES" ]; then
    rm -rf "$rootfs"
    log "debootstrap bookworm (log: $WORK/debootstrap.log)"
    if ! timed "debootstrap" to_log "$WORK/debootstrap.log" debootstrap --variant=minbase \
        --include="$EE_PACKAGES" bookworm "$rootfs" "$MIRROR"; then
      tail -n 20 "$WORK/debootstrap.log" >&2
      die "debootstrap failed"
    fi
    # Trim what a test image never reads.
    rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
      "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
      "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/debootstrap
    # The runtime provides these per container.
    : > "$rootfs/etc/resolv.conf"; : > "$rootfs/etc/hostname"
    # Host keys made at build time would be shared by every target: targets make their own.
    rm -f "$rootfs"/etc/ssh/ssh_host_*
    echo "$EE_PACKAGES" > "$rootfs/.complete"
  fi
  timed "image $EE_IMAGE" "$TC_DIR/mkimage.sh" --rootfs "$rootfs" --tag "$EE_IMAGE" \
    --cmd '["/bin/sleep","infinity"]' --exclude ./.complete --out "$IMG/ee.tar"
  echo "$EE_PACKAGES" > "$IMG/ee.pkgs"
  rm -rf "$rootfs"
}

# debootstrap waits on the mirror and the disk, the binaries below on the CPU: the image is
# built in the background meanwhile (its log: $WORK/ee-image.log) and waited for at the end.
ee_pid=""
if [ "$FORCE" = 1 ] || [ ! -s "$IMG/ee.tar" ] || [ "$(cat "$IMG/ee.pkgs" 2>/dev/null)" != "$EE_PACKAGES" ]; then
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  build_ee >"$WORK/ee-image.log" 2>&1 &
  ee_pid=$!
fi

# ---------------------------------------------------------------- 2. binaries
export GOSUMDB=off GOWORK=off GOTOOLCHAIN=local
# Without these the binaries report v0.0.0-master+$Format:%H$ (kubectl version, discovery).
V=k8s.io/component-base/version
CV=k8s.io/client-go/pkg/version
LDFLAGS="-X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=1 -X $V.gitMinor=$K8S_MINOR -X $V.gitTreeState=clean"
LDFLAGS="$LDFLAGS -X $V.buildDate=2025-04-22T00:00:00Z -X $CV.gitVersion=$K8S_VERSION -X $CV.gitMajor=1 -X $CV.gitMinor=$K8S_MINOR"

# stale file sources...: FORCE=1, file missing, or older than one of the sources
stale() {
  local f=$1 s; shift
  if [ "$FORCE" = 1 ] || [ ! -s "$f" ]; then return 0; fi
  for s in "$@"; do [ "$s" -nt "$f" ] && return 0; done
  return 1
}

# No DWARF: the compile of Kubernetes' packages takes about 14% less CPU and each link a second
# or two less (measured on client-go: 122 s of user time, 105 without), which a cold first
# command on 2 cores feels. Stack traces keep their file and line (pclntab is not DWARF).
NODWARF=(-gcflags=all=-dwarf=false)

# etcd 3.5.17: `go install go.etcd.io/etcd/server/v3@v3.5.17` is refused (its go.mod has
# replace directives), hence the wrapper module.  Debian's etcd 3.4.23 is too old: the
# apiserver then turns off RequestWatchProgress and watches lag by seconds. Built beside
# Kubernetes' binaries (its log: $WORK/etcd-build.log), so that its compile fills the core
# their single-threaded links leave idle, and waited for below.
etcd_pid=""
if [ "$FORCE" = 1 ] || ! "$BIN/etcd" --version 2>/dev/null | grep -q "^etcd Version: $ETCD_VERSION$"; then
  (cd "$TC_DIR/etcd" && timed "built etcd" go build -buildvcs=false "${NODWARF[@]}" -ldflags '-s -w' \
    -o "$BIN/etcd" go.etcd.io/etcd/server/v3) >"$WORK/etcd-build.log" 2>&1 &
  etcd_pid=$!
fi

# One go build for every binary missing: their packages compile once, in one graph, and their
# links (single-threaded) run side by side instead of one after another. K8S_MODULE and
# K8S_BIN are the version's (lib.sh).
[ -s "$K8S_MODULE/go.mod" ] || die "no module for Kubernetes $K8S_VERSION: run tools/testcluster/kubernetes-versions/gen.sh $K8S_VERSION"
cd "$K8S_MODULE"
mkdir -p "$K8S_BIN"
pkgs=() names=()
for c in $K8S_BINARIES; do
  if [ "$FORCE" = 1 ] || ! "$K8S_BIN/$c" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"; then
    pkgs+=("k8s.io/kubernetes/cmd/$c") names+=("$c")
  fi
done
if [ ${#pkgs[@]} -gt 0 ]; then
  timed "built ${names[*]} $K8S_VERSION" go build "${NODWARF[@]}" -ldflags "-s -w $LDFLAGS" -o "$K8S_BIN/" "${pkgs[@]}"
fi
cd "$TC_DIR/kubernetes"
if stale "$BIN/kubeplay-cri" cmd/kubeplay-cri/main.go go.mod; then
  timed "built kubeplay-cri" go build -buildvcs=false -o "$BIN/kubeplay-cri" ./cmd/kubeplay-cri
fi
# The pause binary is the only file of the sandbox image: static, no libc.
if stale "$BIN/kubeplay-pause" cmd/kubeplay-pause/main.go go.mod; then
  timed "built kubeplay-pause" env CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags '-s -w' \
    -o "$BIN/kubeplay-pause" ./cmd/kubeplay-pause
fi

if [ -n "$etcd_pid" ]; then
  if ! wait "$etcd_pid"; then
    tail -n 30 "$WORK/etcd-build.log" >&2
    die "building etcd failed (log: $WORK/etcd-build.log)"
  fi
  cat "$WORK/etcd-build.log"
fi

# ---------------------------------------------------------------- 3. images
if stale "$IMG/pause.tar" "$BIN/kubeplay-pause" "$TC_DIR/mkimage.sh"; then
  rm -rf "$WORK/pause-rootfs" && mkdir -p "$WORK/pause-rootfs"
  cp "$BIN/kubeplay-pause" "$WORK/pause-rootfs/pause"
  timed "image $PAUSE_IMAGE" "$TC_DIR/mkimage.sh" --rootfs "$WORK/pause-rootfs" --tag "$PAUSE_IMAGE" \
    --entrypoint '["/pause"]' --out "$IMG/pause.tar"
  rm -rf "$WORK/pause-rootfs"
fi

if [ -n "$ee_pid" ]; then
  if ! wait "$ee_pid"; then
    tail -n 30 "$WORK/ee-image.log" >&2
    die "building the ee image failed (log: $WORK/ee-image.log)"
  fi
  cat "$WORK/ee-image.log"
fi

log "build done: $("$K8S_BIN/kube-apiserver" --version), etcd $("$BIN/etcd" --version | sed -n 's/^etcd Version: //p')," \
  "images: $(du -sh "$IMG"/*.tar | awk '{printf "%s (%s) ", $2, $1}')"
