#!/usr/bin/env bash
# Builds Terraform VERSION from the Go module proxy into OUT:
#
#   build.sh 1.11.4 .cache/bin/terraform          the CLI set-up puts on PATH when there is none
#   build.sh 1.16.0 .cache/bin/terraform-1.16.0   the second CLI the acceptance tests run on
#
# Terraform's go.mod replaces its remote-state backends (azurerm, consul, cos, gcs,
# kubernetes, oss, pg, s3, and oci from 1.13) and internal/legacy with nested modules that
# the module zip does not contain, so a plain `go build` of the module fails. A copy of the
# module is patched to leave those backends out: their imports and entries in
# internal/backend/init/init.go, and their require/replace lines in go.mod. Leaving them out
# also leaves out their cloud SDKs (AWS, Azure, Google, Tencent, Alibaba, client-go), most
# of what a cold build compiles. kubeplay's quickstart and tests use local state only;
# `terraform init` with one of those backends fails with "Unsupported backend type" in this
# build.
#
# Skips when the binary of the same module sum and script is already built.
set -euo pipefail

VERSION=${1:?usage: build.sh VERSION OUT}
OUT=${2:?usage: build.sh VERSION OUT}
MODULE=github.com/hashicorp/terraform
NAME=terraform-$VERSION
# shellcheck source=module.sh
source "$(dirname "$0")/module.sh"

# 1.11's go.mod sets `godebug tlskyber=0`, a setting Go 1.26 no longer has, which makes its
# go.mod unreadable as a main module. (It turned off a post-quantum TLS key exchange for
# AWS Network Firewall's sake; these builds talk to no cloud.)
sed -i -E '/^godebug tlskyber=/d' "$WORK/go.mod"

# The backends that are nested modules: go.mod's `replace .../remote-state/X => ./...` lines.
mapfile -t backends < <(sed -nE "s#^replace $MODULE/internal/backend/remote-state/([a-z0-9]+) => \./.*#\1#p" "$WORK/go.mod")
[[ ${#backends[@]} -ge 8 ]] || die "go.mod names ${#backends[@]} nested backend modules, expected 8 or more"

# Each one's import in init.go, and the identifier it is imported as, whose map entry goes too.
init=$WORK/internal/backend/init/init.go
for b in "${backends[@]}"; do
	ident=$(sed -nE "s#^[[:space:]]*(backend[A-Za-z0-9]+) \"$MODULE/internal/backend/remote-state/$b\"\$#\1#p" "$init")
	[[ -n $ident ]] || die "init.go does not import the $b backend"
	grep -qE "return $ident\.New\(\) \},\$" "$init" || die "init.go has no map entry for $ident"
	sed -i -E -e "\#\"$MODULE/internal/backend/remote-state/$b\"\$#d" -e "/return $ident\.New\(\) \},\$/d" "$init"
	! grep -qE "\b$ident\b" "$init" || die "init.go still names $ident"
	(cd "$WORK" && go mod edit -droprequire="$MODULE/internal/backend/remote-state/$b" \
		-dropreplace="$MODULE/internal/backend/remote-state/$b")
done
grep -qE "^replace $MODULE/internal/legacy => " "$WORK/go.mod" || die "go.mod has no replace of internal/legacy"
(cd "$WORK" && go mod edit -droprequire="$MODULE/internal/legacy" -dropreplace="$MODULE/internal/legacy")
! (cd "$WORK" && go mod edit -json) | grep -qE "internal/(backend/remote-state|legacy)" ||
	die "go.mod still names a nested module"

# No DWARF: less to compile and link; stack traces keep their file and line.
(cd "$WORK" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -X $MODULE/version.dev=no" -o "$OUT.tmp" .)
check_version "Terraform v$VERSION" env -u TF_CLI_CONFIG_FILE "$OUT.tmp" version
mv "$OUT.tmp" "$OUT"
echo "$want" >"$STAMP"
rm -rf "$WORK"
echo "terraform-$VERSION: $("$OUT" version | head -1) at $OUT (without the nested remote-state backends: ${backends[*]})"
