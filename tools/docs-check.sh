#!/usr/bin/env bash
# docs-check.sh - fails when docs/ is not what make generate writes from the working
# tree (templates/, examples/ and the schemas' descriptions), or when a file under
# examples/ is not formatted as terraform fmt writes it, and prints the differences
# (make docs-check). It writes nothing in the working tree: the docs are rendered into
# a temporary directory, and terraform fmt only checks.
#
# The provider is built once, and Terraform (TERRAFORM_NEXT: 1.11 does not report
# resource identity schemas) reads its schema once, for both tfplugindocs generate and
# tfplugindocs validate, as tfplugindocs does by itself: the build is most of the time.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TFPLUGINDOCS:?}" "${TERRAFORM_NEXT:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quiet() { # quiet LOG COMMAND...: COMMAND's output goes to LOG, printed when it fails
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
}

# The schema as tfplugindocs reads it: of registry.terraform.io/hashicorp/kubeplay,
# installed from a plugin directory.
mkdir -p "$tmp/schema"
plugin=$tmp/schema/plugins/registry.terraform.io/hashicorp/kubeplay/0.0.1/$(go env GOOS)_$(go env GOARCH)
go build -o "$plugin/terraform-provider-kubeplay" .
echo 'provider "kubeplay" {}' >"$tmp/schema/provider.tf"
(
  cd "$tmp/schema"
  export TF_CLI_CONFIG_FILE=/dev/null CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
  quiet init.log "$TERRAFORM_NEXT" init -input=false -no-color -plugin-dir=./plugins
  "$TERRAFORM_NEXT" providers schema -json >"$tmp/schema.json"
)

# tfplugindocs joins --rendered-website-dir to the provider's directory: a relative path.
quiet "$tmp/generate.log" "$TFPLUGINDOCS" generate --provider-name kubeplay --providers-schema "$tmp/schema.json" \
  --rendered-website-dir "$(realpath --relative-to=. "$tmp/docs")"
status=0
# - is the working tree's docs/, + what make generate would write.
if ! diff -ru docs "$tmp/docs" | sed "s|$tmp/docs|generated|g"; then
  echo "docs-check: docs/ differs from what make generate writes (above): run make generate and commit docs/"
  status=1
fi
if ! terraform fmt -check -recursive -diff -no-color examples/; then
  echo "docs-check: the files of examples/ above are not formatted: run make generate, which formats them"
  status=1
fi
if ! "$TFPLUGINDOCS" validate --provider-name kubeplay --providers-schema "$tmp/schema.json" >"$tmp/validate.log" 2>&1; then
  # Its errors, without the line per file it checked.
  grep -v -e '\[DEBUG\]' -e '^running ' "$tmp/validate.log"
  echo "docs-check: tfplugindocs validate refuses docs/ (above)"
  status=1
fi
exit $status
