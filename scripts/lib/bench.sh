# Sourced by the benchmark scripts (after setting $root): picks the release bundle-tool when
# there is one (`cargo build --release -p bundle-tool`), else the debug build, as $tool, and
# starts the loopback registry (lib/registry.sh: $work, $port).
tool="$root/target/release/bundle-tool"
[ -x "$tool" ] || tool="$root/target/debug/bundle-tool"
echo "using $tool"
# shellcheck source=registry.sh
. "$root/scripts/lib/registry.sh"
