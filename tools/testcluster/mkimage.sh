#!/usr/bin/env bash
# mkimage.sh - write a single-layer container image from a directory as a "docker-archive"
# tarball (the `docker save` layout), without docker or a registry:
#
#   manifest.json                 [{"Config": "<sha>.json", "RepoTags": [TAG], "Layers": [...]}]
#   <sha>.json                    image config; rootfs.diff_ids = sha256 of the layer tar
#   <diff-id>/layer.tar           the directory as an uncompressed tar
#
# `ctr -n k8s.io images import FILE` loads it under TAG (a tag like kubeplay.test/x:v1 has
# a registry part, so it is kept as is, which is also how the kubelet names the pod's image).
#
# Usage: mkimage.sh --rootfs DIR --tag TAG --out FILE [--cmd JSON] [--entrypoint JSON]
#                   [--env K=V]... [--exclude PATTERN]...
#   JSON: a JSON array of strings, e.g. '["/bin/sleep","infinity"]'.
set -euo pipefail
export LC_ALL=C

rootfs="" tag="" out="" cmd=null entrypoint=null
envs=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
excludes=('./dev/*' './proc/*' './sys/*' './run/*' './tmp/*')
while [ $# -gt 0 ]; do
  case "$1" in
    --rootfs) rootfs=$2 ;;
    --tag) tag=$2 ;;
    --out) out=$2 ;;
    --cmd) cmd=$2 ;;
    --entrypoint) entrypoint=$2 ;;
    --env) envs+=("$2") ;;
    --exclude) excludes+=("$2") ;;
    *) echo "mkimage.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
if [ ! -d "$rootfs" ] || [ -z "$tag" ] || [ -z "$out" ]; then
  echo "usage: mkimage.sh --rootfs DIR --tag TAG --out FILE [--cmd JSON] [--entrypoint JSON]" >&2
  exit 2
fi

# json_str s: s as a JSON string (our inputs are paths, tags and env entries: only \ and "
# need escaping; control characters are refused)
json_str() {
  [[ "$1" != *[[:cntrl:]]* ]] || { echo "mkimage.sh: control character in $1" >&2; exit 2; }
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}
for j in "$cmd" "$entrypoint"; do
  [[ "$j" == null || "$j" =~ ^\[.*\]$ ]] || { echo "mkimage.sh: want a JSON array, got $j" >&2; exit 2; }
done

work=$(mktemp -d "$(dirname "$out")/.mkimage.XXXXXX")
trap 'rm -rf "$work"' EXIT

# 1. the layer: numeric owners, xattrs (file capabilities), sorted for reproducibility
tar_excludes=()
for e in "${excludes[@]}"; do tar_excludes+=("--exclude=$e"); done
tar -C "$rootfs" --numeric-owner --xattrs --xattrs-include='*' --sort=name "${tar_excludes[@]}" \
  -cf "$work/layer.tar" .
diff=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir "$work/$diff"
mv "$work/layer.tar" "$work/$diff/layer.tar"

# 2. the image config
arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
env_json=""
for e in "${envs[@]}"; do env_json="$env_json${env_json:+,}$(json_str "$e")"; done
created=1970-01-01T00:00:00Z   # fixed: same input, same image ID
config=$(printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Env":[%s],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"tools/testcluster/mkimage.sh"}]}' \
  "$arch" "$created" "$env_json" "$entrypoint" "$cmd" "$diff" "$created")
printf '%s' "$config" > "$work/config.json"
cfg=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$work/$cfg.json"

# 3. manifest and the outer archive (written next to the target, then renamed into place)
printf '[{"Config":"%s.json","RepoTags":[%s],"Layers":["%s/layer.tar"]}]' "$cfg" "$(json_str "$tag")" "$diff" \
  > "$work/manifest.json"
tar -C "$work" -cf "$work/image.tar" manifest.json "$cfg.json" "$diff"
mv "$work/image.tar" "$out"
echo "$tag: $out ($(( $(stat -c %s "$out") / 1048576 )) MiB, layer sha256:${diff:0:12}, config sha256:${cfg:0:12})"
