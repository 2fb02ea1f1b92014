#!/usr/bin/env bash
# The operator binary of a released version, rebuilt from the commit bundles/releases.yaml
# records for it, static (as `make static` builds HEAD's, for a FROM-scratch image: the OLM
# drill runs it as the pod of the released bundle), in the profile `make static` builds
# (STATIC_PROFILE: release, dev inside `make test`): a detached git worktree of that commit
# (under target/releases/src) built with this checkout's target dir. The binary is kept as
# target/releases/<version>/model-orchestra-operator with the commit and profile it came
# from; a second run is a no-op. Prints the binary's path.
#
# When the binary's inputs at the release commit are the working tree's — every source file
# `make static`'s dep-info lists for it, the crates' manifests and Cargo.lock — the binary
# `make static` built is the release's (built from the same sources, flags and toolchain),
# and is taken instead: a release cut from the current code costs no second build.
#
#   scripts/released-operator.sh 0.1.0
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: released-operator.sh VERSION}
commit=$(awk -v v="$version" '$1 == "-" && $2 == "version:" { found = ($3 == v) } found && $1 == "commit:" { print $2; exit }' "$root/bundles/releases.yaml")
[ -n "$commit" ] || { echo "released-operator: bundles/releases.yaml records no commit for $version" >&2; exit 1; }
profile=${STATIC_PROFILE:-release}
out=$root/target/releases/$version
if [ -x "$out/model-orchestra-operator" ] && [ "$(cat "$out/commit" 2>/dev/null)" = "$commit" ] \
  && [ "$(cat "$out/profile" 2>/dev/null)" = "$profile" ]; then
  echo "$out/model-orchestra-operator"
  exit 0
fi
git -C "$root" cat-file -e "$commit^{commit}" 2>/dev/null || { echo "released-operator: commit $commit ($version) is not in this clone (fetch the full history)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-$root/target}
static_target=x86_64-unknown-linux-gnu
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS='-C target-feature=+crt-static'
# A release is built as it was released, by rustc: `make test`'s clippy wrapper would lint
# old code with today's clippy (and fail on its new lints).
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
profile_dir=$profile; [ "$profile" = dev ] && profile_dir=debug
head_binary=$target/$static_target/$profile_dir/model-orchestra-operator
# The files under the checkout the binary was built from (not the build's own outputs).
inputs_of() {
  tr ' ' '\n' < "$1" | tail -n +2 | sed -n "s|^$root/||p" | grep -v '^target/' \
    | while read -r f; do realpath -m --relative-to="$root" "$root/$f"; done | sort -u
}
if [ -x "$head_binary" ] && [ -f "$head_binary.d" ]; then
  inputs=$(inputs_of "$head_binary.d")
  manifests=$(for d in $(echo "$inputs" | cut -d/ -f1 | sort -u); do [ -f "$root/$d/Cargo.toml" ] && echo "$d/Cargo.toml"; done)
  # shellcheck disable=SC2086
  if [ -n "$inputs" ] && git -C "$root" diff --quiet "$commit" -- $inputs $manifests Cargo.toml Cargo.lock \
    && [ -z "$(cd "$root" && git ls-files --others --exclude-standard -- $inputs)" ] \
    && [ "$(stat -c %Y "$head_binary")" -ge "$(cd "$root" && stat -c %Y $inputs $manifests Cargo.toml Cargo.lock | sort -n | tail -1)" ]; then
    mkdir -p "$out"
    cp "$head_binary" "$out/model-orchestra-operator"
    echo "$commit" >"$out/commit"
    echo "$profile" >"$out/profile"
    echo "released-operator: $version ($commit) has the working tree's sources: make static's binary is its" >&2
    echo "$out/model-orchestra-operator"
    exit 0
  fi
fi
src=$root/target/releases/src/$version
git -C "$root" worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
git -C "$root" worktree prune
git -C "$root" worktree add --quiet --detach "$src" "$commit"
# The static target, so a release build shares the dependencies both lock files pin with
# HEAD's `make static`. In the dev profile (inside `make test`) nothing would be shared (the
# tiers' build unifies the dev-dependencies' features into every dependency), so the
# release's code is built at opt-level 0 without debug info: a fixture whose behaviour, not
# speed, the drills need, compiled in a third of the time (150 s of CPU against 490 s).
overrides=()
if [ "$profile" = dev ]; then
  overrides=(--config profile.dev.opt-level=0 --config profile.dev.debug=false
    --config 'profile.dev.package."*".opt-level=0' --config 'profile.dev.package."*".debug=false')
fi
# The binary (and its dep-info) lands on HEAD's: they are put back after (unlinked first:
# cargo hard-links them to its own outputs).
kept=$(mktemp -d)
for f in "$head_binary" "$head_binary.d"; do if [ -e "$f" ]; then cp -p "$f" "$kept/"; fi; done
start=$SECONDS
(cd "$src" && CARGO_INCREMENTAL=0 CARGO_TARGET_DIR=$target \
  cargo build --quiet --locked --profile "$profile" "${overrides[@]}" --target $static_target -p model-orchestra-operator --bin model-orchestra-operator)
mkdir -p "$out"
cp "$target/$static_target/$profile_dir/model-orchestra-operator" "$out/model-orchestra-operator"
echo "$commit" >"$out/commit"
echo "$profile" >"$out/profile"
git -C "$root" worktree remove --force "$src"
for f in "$head_binary" "$head_binary.d"; do
  rm -f "$f"
  if [ -e "$kept/$(basename "$f")" ]; then cp -p "$kept/$(basename "$f")" "$f"; fi
done
rm -rf "$kept"
echo "released-operator: $version built from $commit in $((SECONDS - start)) s" >&2
echo "$out/model-orchestra-operator"
