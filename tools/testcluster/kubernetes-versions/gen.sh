#!/usr/bin/env bash
# gen.sh VERSION - writes the Go module that the test cluster builds Kubernetes VERSION's
# components from (<VERSION>/go.mod, go.sum, tools.go): k8s.io/kubernetes at VERSION, each
# staging module its go.mod replaces with ./staging/... replaced by the published module of
# the same minor (v0.X.Y), then go mod tidy. The default version's module is ../kubernetes,
# which also holds kubeplay-cri and kubeplay-pause.
set -euo pipefail
v=${1:?usage: gen.sh vMAJOR.MINOR.PATCH}
dir=$(cd "$(dirname "$0")" && pwd)/$v
export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off
upstream=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
mkdir -p "$dir"
{
  echo "module github.com/kubeplay/terraform-provider-kubeplay/tools/testcluster/kubernetes-versions/$v"
  echo
  grep -m1 '^go ' "$upstream"
  echo
  echo "require k8s.io/kubernetes $v"
  echo
  sed -n 's|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*|replace \1 => \1 v0.'"${v#v1.}"'|p' "$upstream"
} >"$dir/go.mod"
# The default module's tools.go without cri-api, which only kubeplay-cri (built there) needs.
grep -v 'cri-api' "$(dirname "$0")/../kubernetes/tools.go" >"$dir/tools.go"
cd "$dir" && go mod tidy
