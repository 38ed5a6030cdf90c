#!/usr/bin/env bash
# capi.sh build | import 1|2 - the Cluster API core controller manager for the test clusters,
# built from the source of its Go module, as an image no registry ever serves.
#
#   build     <cache>/bin/capi-manager-<v>: package core (core/main.go) of module
#             sigs.k8s.io/cluster-api <v>, CGO_ENABLED=0, built in <cache>/build/capi-<v>, a
#             writable copy of the module (the module zip lacks api/, the directory its go.mod
#             replaces sigs.k8s.io/cluster-api/api with: that module is put there) with the
#             module's own go.mod and go.sum; then <cache>/img/capi-manager-<v>.tar, image
#             kubeplay.test/capi-manager:<v> made by mkimage.sh: /manager, /etc/passwd and
#             /etc/group naming the nonroot user 65532, an empty /tmp (mode 1777).
#             Each step is skipped when its output is there (FORCE=1 rebuilds).
#   import N  that image into the containerd of cluster N (1: up.sh's, 2: cluster2.sh's, entered
#             by its namespaces as cluster2.sh does), unless it is there already. The cluster
#             must be up.
#
# Environment: KUBEPLAY_CACHE_DIR (default <repo>/.cache), FORCE=1.
set -euo pipefail
CAPI_VERSION=v1.14.2
CAPI_MODULE=sigs.k8s.io/cluster-api

usage() { echo "usage: capi.sh build | import 1|2" >&2; exit 2; }
[ $# -ge 1 ] || usage
# lib.sh's settings (state dir, containerd socket) are those of the cluster to import into.
if [ "$1" = import ] && [ "${2:-}" = 2 ]; then export KUBEPLAY_SECOND_CLUSTER=1; else unset KUBEPLAY_SECOND_CLUSTER; fi
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FORCE=${FORCE:-0}
CAPI_IMAGE=kubeplay.test/capi-manager:$CAPI_VERSION
CAPI_BIN=$BIN/capi-manager-$CAPI_VERSION
CAPI_TAR=$IMG/capi-manager-$CAPI_VERSION.tar
WORK=$CACHE/build/capi-$CAPI_VERSION

# built: the binary and the image tarball are there, the tarball no older than what it is made of.
built() {
  [ "$FORCE" != 1 ] && [ -s "$CAPI_BIN" ] && [ -s "$CAPI_TAR" ] &&
    [ ! "$CAPI_BIN" -nt "$CAPI_TAR" ] && [ ! "$TC_DIR/mkimage.sh" -nt "$CAPI_TAR" ]
}

build() {
  if built; then
    log "$CAPI_IMAGE: $CAPI_TAR (built)"
    return 0
  fi
  mkdir -p "$BIN" "$IMG" "$CACHE/build"
  # One build at a time per cache dir (build.sh's lock); the first may have done our work.
  exec 8>>"$CACHE/build.lock"
  flock 8
  if built; then log "$CAPI_IMAGE: $CAPI_TAR (built meanwhile)"; return 0; fi

  export GOWORK=off GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly"
  if [ "$FORCE" = 1 ] || [ ! -s "$CAPI_BIN" ]; then
    local dir apidir s
    s=${EPOCHREALTIME/./}
    # go mod download -json prints the module's directory in the module cache ("Dir").
    dir=$(go mod download -json "$CAPI_MODULE@$CAPI_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    apidir=$(go mod download -json "$CAPI_MODULE/api@$CAPI_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -f "$dir/go.mod" ] && [ -f "$apidir/go.mod" ] || die "go mod download $CAPI_MODULE@$CAPI_VERSION: no module directory"
    grep -qx "replace $CAPI_MODULE/api => ./api" "$dir/go.mod" ||
      die "$dir/go.mod no longer replaces $CAPI_MODULE/api with ./api: check the build"
    log "module source: $dir (+ api: $apidir) ($(elapsed "$s")s)"
    # The module cache is read-only: build in a writable copy.
    rm -rf "$WORK"
    mkdir -p "$WORK"
    cp -R "$dir/." "$WORK/src"
    [ ! -e "$WORK/src/api" ] || die "$dir has an api/ of its own: check the build"
    cp -R "$apidir" "$WORK/src/api"
    chmod -R u+w "$WORK/src"
    # As the release Makefile/Dockerfile: static, trimmed, versioned, the fieldsv1string tag.
    local v=sigs.k8s.io/cluster-api/version minor=${CAPI_VERSION#v*.}
    minor=${minor%%.*}
    cd "$WORK/src"
    timed "built capi-manager $CAPI_VERSION" env CGO_ENABLED=0 go build -tags=fieldsv1string -trimpath \
      -ldflags "-s -w -X $v.gitVersion=$CAPI_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z" \
      -o "$CAPI_BIN.tmp" ./core
    mv -f "$CAPI_BIN.tmp" "$CAPI_BIN"
    cd "$TC_DIR"
    rm -rf "$WORK"
  fi

  local rootfs=$CACHE/build/capi-rootfs
  rm -rf "$rootfs"
  mkdir -p "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"      # controller-runtime and klog may write temporary files
  cp "$CAPI_BIN" "$rootfs/manager"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
  timed "image $CAPI_IMAGE" "$TC_DIR/mkimage.sh" --rootfs "$rootfs" --tag "$CAPI_IMAGE" \
    --entrypoint '["/manager"]' --out "$CAPI_TAR"
  rm -rf "$rootfs"
}

# import_image: into the containerd of the cluster lib.sh is set up for (see the top).
import_image() {
  require_root
  [ -s "$CAPI_TAR" ] || die "$CAPI_TAR is missing: run capi.sh build"
  [ -e "$STATE/.kubeplay-testcluster" ] || die "no cluster in $STATE: start it first"
  lock_state   # not while up.sh (re)starts containerd
  local pid cmd=(ctr --address "$SOCK" -n k8s.io images)
  pid=$(running containerd)
  [ -n "$pid" ] || die "containerd of $STATE does not run: start the cluster first"
  if [ "${KUBEPLAY_SECOND_CLUSTER:-}" = 1 ]; then
    # As cluster2.sh's in_cluster2: its containerd's network and mount namespaces.
    cmd=(nsenter -t "$pid" -m -n "${cmd[@]}")
  fi
  # Import when the tarball changed (size, mtime, path) or the image is gone, as up.sh does.
  # (The list first: grep -q quits at the first match, and under pipefail ctr's SIGPIPE would
  # count as "not there".)
  local stamp images record=$STATE/imported.${CAPI_TAR##*/}
  stamp="$(stat -c '%s %Y' "$CAPI_TAR") $CAPI_TAR"
  images=$("${cmd[@]}" ls -q) || die "cannot list the images of $NODE_NAME's containerd"
  if [ "$(cat "$record" 2>/dev/null)" = "$stamp" ] && grep -qxF "$CAPI_IMAGE" <<<"$images"; then
    log "$CAPI_IMAGE already in $NODE_NAME's containerd"
    return 0
  fi
  local s=${EPOCHREALTIME/./}
  "${cmd[@]}" import "$CAPI_TAR" >/dev/null || die "cannot import $CAPI_TAR"
  echo "$stamp" > "$record"
  log "imported $CAPI_IMAGE into $NODE_NAME's containerd ($(elapsed "$s")s)"
}

case "$1" in
  build) [ $# = 1 ] || usage; build ;;
  import)
    [ $# = 2 ] || usage
    case "$2" in 1|2) import_image ;; *) usage ;; esac
    ;;
  *) usage ;;
esac
