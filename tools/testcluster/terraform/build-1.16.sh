#!/usr/bin/env bash
# Builds Terraform v1.16.0 from the Go module proxy into $CACHE/bin/terraform-1.16.0,
# the second CLI the acceptance tests run on (beside the 1.11.4 on PATH).
#
# The module's go.mod replaces nine remote-state backends (azurerm, consul, cos, gcs,
# kubernetes, oci, oss, pg, s3) and internal/legacy with nested modules that the module
# zip does not contain, so a plain `go build` of the module fails. A copy of the module
# is patched to leave those backends out: their imports and entries in
# internal/backend/init/init.go, and their require/replace lines in go.mod. The tests
# use local state only; `terraform init` with one of those backends fails with
# "Unsupported backend type" in this build.
#
# Skips when the binary of the same module sum and script is already built.
set -euo pipefail

VERSION=1.16.0
MODULE=github.com/hashicorp/terraform
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
CACHE=${CACHE:-${KUBEPLAY_CACHE_DIR:-$ROOT/.cache}}
OUT=$CACHE/bin/terraform-$VERSION
WORK=$CACHE/terraform-$VERSION-src
STAMP=$OUT.stamp
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

die() { echo "terraform-$VERSION: $*" >&2; exit 1; }

# Dir and Sum of the downloaded module, from `go mod download -json`.
info=$(cd /tmp && go mod download -json "$MODULE@v$VERSION") || die "go mod download failed"
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"$info" | head -1; }
dir=$(field Dir)
sum=$(field Sum)
[[ -d $dir && -n $sum ]] || die "go mod download gave no Dir/Sum: $info"

want="$sum $(sha256sum "$0" | cut -d' ' -f1)"
if [[ -x $OUT && -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
	echo "terraform-$VERSION: $OUT (up to date)"
	exit 0
fi

echo "terraform-$VERSION: building into $OUT (several minutes)"
rm -rf "$WORK"
mkdir -p "$(dirname "$WORK")" "$CACHE/bin"
cp -r "$dir" "$WORK"
chmod -R u+w "$WORK"

# The nine backends: import path element and the identifier init.go gives each.
paths='azure|consul|cos|gcs|kubernetes|oci|oss|pg|s3'
idents='Azure|Consul|Cos|GCS|Kubernetes|OCI|OSS|Pg|S3'
init=$WORK/internal/backend/init/init.go
n_import=$(grep -cE "\"$MODULE/internal/backend/remote-state/($paths)\"$" "$init" || true)
n_entry=$(grep -cE "return backend($idents)\.New\(\) \},$" "$init" || true)
[[ $n_import == 9 && $n_entry == 9 ]] ||
	die "init.go changed upstream: found $n_import of 9 backend imports and $n_entry of 9 map entries"
sed -i -E \
	-e "\#\"$MODULE/internal/backend/remote-state/($paths)\"\$#d" \
	-e "/return backend($idents)\.New\(\) \},\$/d" "$init"
! grep -qE "backend($idents)\b" "$init" || die "init.go still names a removed backend"

# Their require and replace lines, and internal/legacy's, from go.mod.
nested=""
for m in azure consul cos gcs kubernetes oci oss pg s3; do
	nested="$nested $MODULE/internal/backend/remote-state/$m"
done
nested="$nested $MODULE/internal/legacy"
for p in $nested; do
	grep -qE "^[[:space:]]*$p v" "$WORK/go.mod" || die "go.mod has no require of $p"
	grep -qE "^replace $p => " "$WORK/go.mod" || die "go.mod has no replace of $p"
	(cd "$WORK" && go mod edit -droprequire="$p" -dropreplace="$p")
done
! (cd "$WORK" && go mod edit -json) | grep -qE "internal/(backend/remote-state|legacy)" ||
	die "go.mod still names a nested module"

(cd "$WORK" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -X $MODULE/version.dev=no" -o "$OUT.tmp" .)
"$OUT.tmp" version | head -1 | grep -qx "Terraform v$VERSION" || die "built binary is not v$VERSION"
mv "$OUT.tmp" "$OUT"
echo "$want" >"$STAMP"
rm -rf "$WORK"
echo "terraform-$VERSION: $("$OUT" version | head -1) at $OUT"
