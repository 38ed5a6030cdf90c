#!/usr/bin/env bash
# Builds OpenTofu VERSION from the Go module proxy into OUT:
#
#   build-tofu.sh 1.12.6 .cache/bin/tofu-1.12.6    the third CLI the acceptance tests run on
#
# OpenTofu's module builds as it is (its go.mod's one replace names another served module),
# but its remote-state backends (azurerm, consul, cos, gcs, kubernetes, oss, pg, s3) and its
# cloud key providers for state encryption (aws_kms, gcp_kms, azure_vault, openbao) bring
# their cloud SDKs, most of what a cold build compiles. A copy of the module leaves them
# out: their imports and registrations in internal/backend/init/init.go and
# internal/encryption/default_registry.go. kubeplay's tests use local state only; `tofu init`
# with one of those backends fails with "Unsupported backend type" in this build, and state
# encryption keeps pbkdf2 and external key providers.
#
# Skips when the binary of the same module sum and script is already built.
set -euo pipefail

VERSION=${1:?usage: build-tofu.sh VERSION OUT}
OUT=${2:?usage: build-tofu.sh VERSION OUT}
MODULE=github.com/opentofu/opentofu
NAME=tofu-$VERSION
# shellcheck source=module.sh
source "$(dirname "$0")/module.sh"

# drop FILE PKG...: remove from FILE the import of each package and every line that uses the
# identifier it is imported as (a map entry or a registration, each on one line; for the
# registrations, the `panic` block that follows goes with its `if`).
drop() {
	local file=$1 pkg ident
	shift
	for pkg in "$@"; do
		ident=$(sed -nE "s#^[[:space:]]*([A-Za-z0-9_]+ )?\"$MODULE/$pkg\"\$#\1#p" "$file" | tr -d ' ')
		[[ -n $(grep -E "\"$MODULE/$pkg\"\$" "$file") ]] || die "$(basename "$file") does not import $pkg"
		[[ -n $ident ]] || ident=${pkg##*/}
		sed -i -E "\#\"$MODULE/$pkg\"\$#d" "$file"
		# `if err := DefaultRegistry.RegisterKeyProvider(x.New()); err != nil {` `panic(err)` `}`
		sed -i -E "/\b$ident\.New\(\)\); err != nil \{\$/,/^\t\}\$/d" "$file"
		# `"name": func(enc ...) backend.Backend { return x.New(enc) },`
		sed -i -E "/return $ident\.New\(enc\) \},\$/d" "$file"
		! grep -qE "\b$ident\." "$file" || die "$(basename "$file") still uses $ident"
	done
}

backends=(azure consul cos gcs kubernetes oss pg s3)
drop "$WORK/internal/backend/init/init.go" "${backends[@]/#/internal/backend/remote-state/}"
keyproviders=(aws_kms gcp_kms azure_vault openbao)
drop "$WORK/internal/encryption/default_registry.go" "${keyproviders[@]/#/internal/encryption/keyprovider/}"

(cd "$WORK" && go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w -X $MODULE/version.dev=no" \
	-o "$OUT.tmp" ./cmd/tofu)
# (No CLI configuration: OpenTofu warns on stdout about a TF_CLI_CONFIG_FILE that does not exist.)
check_version "OpenTofu v$VERSION" env -u TF_CLI_CONFIG_FILE "$OUT.tmp" version
mv "$OUT.tmp" "$OUT"
echo "$want" >"$STAMP"
rm -rf "$WORK"
echo "tofu-$VERSION: OpenTofu v$VERSION at $OUT (without the remote-state backends ${backends[*]}" \
	"and the key providers ${keyproviders[*]})"
