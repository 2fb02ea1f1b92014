# Sourced by the benchmark scripts (after setting $root): picks the release bundle-tool when
# there is one (`cargo build --release -p bundle-tool`), else the debug build, as $tool, and
# starts the loopback registry (lib/registry.sh: $work, $port).
cargo_target="${CARGO_TARGET_DIR:-$root/target}"
# The Makefile builds for x86_64-unknown-linux-gnu (CARGO_BUILD_TARGET); plain cargo for the host.
tool=
for dir in "$cargo_target/x86_64-unknown-linux-gnu/release" "$cargo_target/release" "$cargo_target/x86_64-unknown-linux-gnu/debug" "$cargo_target/debug"; do
  [ -x "$dir/bundle-tool" ] && { tool="$dir/bundle-tool"; break; }
done
[ -n "$tool" ] || { echo "no bundle-tool built: cargo build --release -p bundle-tool" >&2; exit 1; }
echo "using $tool"
# shellcheck source=registry.sh
. "$root/scripts/lib/registry.sh"
