# shellcheck shell=bash
# module.sh - sourced by build.sh (Terraform) and build-tofu.sh (OpenTofu) once they have set
# NAME (the log prefix), MODULE, VERSION and OUT: downloads MODULE@vVERSION through the Go
# module proxy, takes OUT's lock, exits when OUT is already built from the same module sum
# and scripts (a stamp beside OUT), and otherwise leaves a writable copy of the module in
# WORK for the caller to patch and build. Defines die and STAMP.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
CACHE=${CACHE:-${KUBEPLAY_CACHE_DIR:-$ROOT/.cache}}
WORK=$CACHE/$NAME-src
STAMP=$OUT.stamp
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod

die() { echo "$NAME: $*" >&2; exit 1; }

# check_version LINE CMD...: CMD's first line of output must be LINE. The output is read whole:
# `CMD | head -1 | grep -q` under pipefail fails whenever CMD writes its second line after
# head or grep has exited (SIGPIPE), which a cold CI run on a loaded machine hit.
check_version() {
	local want=$1 out
	shift
	out=$("$@" 2>&1) || die "the built binary failed to print its version: $out"
	[[ ${out%%$'\n'*} == "$want" ]] || die "built binary is not ${want##* }: $out"
}

# Dir and Sum of the downloaded module, from `go mod download -json`.
info=$(cd /tmp && go mod download -json "$MODULE@v$VERSION") || die "go mod download failed"
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"$info" | head -1; }
dir=$(field Dir)
sum=$(field Sum)
[[ -d $dir && -n $sum ]] || die "go mod download gave no Dir/Sum: $info"

want="$sum $(cat "$0" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
# One build of OUT at a time (a worktree's make generate and a test run may both ask): the
# others wait, then find it built.
mkdir -p "$(dirname "$OUT")"
exec 9>"$OUT.lock"
flock 9
if [[ -x $OUT && -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
	echo "$NAME: $OUT (up to date)"
	exit 0
fi

echo "$NAME: building into $OUT (a few minutes)"
rm -rf "$WORK"
mkdir -p "$(dirname "$WORK")"
cp -r "$dir" "$WORK"
chmod -R u+w "$WORK"
