#!/usr/bin/env bash
# The operator binary of a released version, rebuilt from the commit bundles/releases.yaml
# records for it, static (as `make static` builds HEAD's, for a FROM-scratch image: the OLM
# drill runs it as the pod of the released bundle): a detached git worktree of that commit
# (under target/releases/src) built with this checkout's target dir, so the dependencies it
# shares with HEAD's static build are not built twice. The binary is kept as
# target/releases/<version>/model-orchestra-operator with the commit it came from; a second
# run is a no-op. Prints the binary's path.
#
#   scripts/released-operator.sh 0.1.0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: released-operator.sh VERSION}
commit=$(awk -v v="$version" '$1 == "-" && $2 == "version:" { found = ($3 == v) } found && $1 == "commit:" { print $2; exit }' "$root/bundles/releases.yaml")
[ -n "$commit" ] || { echo "released-operator: bundles/releases.yaml records no commit for $version" >&2; exit 1; }
out=$root/target/releases/$version
if [ -x "$out/model-orchestra-operator" ] && [ "$(cat "$out/commit" 2>/dev/null)" = "$commit" ]; then
  echo "$out/model-orchestra-operator"
  exit 0
fi
git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null || { echo "released-operator: commit $commit ($version) is not in this clone (fetch the full history)" >&2; exit 1; }
src=$root/target/releases/src/$version
git -C "$root" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
git -C "$root" worktree prune
git -C "$root" worktree add --quiet --detach "$src" "$commit"
target=${CARGO_TARGET_DIR:-$root/target}
# The release profile and static target as HEAD's `make static`, so the dependencies both
# lock files pin are reused rather than rebuilt. The binary lands on HEAD's static one:
# copy it out, then put HEAD's back.
start=$SECONDS
static_target=x86_64-unknown-linux-gnu
(cd "$src" && CARGO_INCREMENTAL=0 CARGO_TARGET_DIR=$target RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --quiet --locked --release --target $static_target -p model-orchestra-operator --bin model-orchestra-operator)
mkdir -p "$out"
cp "$target/$static_target/release/model-orchestra-operator" "$out/model-orchestra-operator"
echo "$commit" >"$out/commit"
git -C "$root" worktree remove --force "$src"
(cd "$root" && RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release --target $static_target -p model-orchestra-operator -p mo-pod)
echo "released-operator: $version built from $commit in $((SECONDS - start)) s" >&2
echo "$out/model-orchestra-operator"
