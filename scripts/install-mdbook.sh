#!/usr/bin/env bash
# Installs mdbook, pinned, into target/tools/bin (`make docs` builds the book with it).
# A second run is a no-op: cargo is only asked when the installed binary is not this
# version. Without the `serve` and `watch` features (a web server and a file watcher the
# build does not need): fewer crates to build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
MDBOOK_VERSION=0.5.4
tools="$root/target/tools"
if [ "$("$tools/bin/mdbook" --version 2>/dev/null)" = "mdbook v$MDBOOK_VERSION" ]; then
  exit 0
fi
echo "install-mdbook: mdbook $MDBOOK_VERSION into target/tools/bin" >&2
# Built in cargo's own temporary directory, not the workspace's target dir.
env -u CARGO_TARGET_DIR cargo install --locked --quiet --version "$MDBOOK_VERSION" mdbook \
  --no-default-features --features search --root "$tools"
