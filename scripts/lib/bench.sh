# Sourced by the benchmark scripts (after setting $root): picks the release bundle-tool when
# there is one (`cargo build --release -p bundle-tool`), else the debug build, as $tool, and
# starts the loopback registry (lib/registry.sh: $work, $port).
cargo_target="${CARGO_TARGET_DIR:-$root/target}"
tool="$cargo_target/release/bundle-tool"
[ -x "$tool" ] || tool="$cargo_target/debug/bundle-tool"
echo "using $tool"
# shellcheck source=registry.sh
. "$root/scripts/lib/registry.sh"
