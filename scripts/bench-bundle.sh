#!/usr/bin/env bash
# Benchmark: bundle generate + validate + build + push to a loopback docker-registry, with the
# binaries already built (`make build`). Prints wall time per step and in total, and the
# compressed size of the operator image when a static binary exists (`make static`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The release build when there is one (`cargo build --release -p bundle-tool`), else debug.
tool="$root/target/release/bundle-tool"
[ -x "$tool" ] || tool="$root/target/debug/bundle-tool"
echo "using $tool"
work=$(mktemp -d)
registry_pid=
trap '[ -n "$registry_pid" ] && kill $registry_pid 2>/dev/null; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: /nonexistent\nhttp:\n  addr: 127.0.0.1:5000\n' > "$work/config.yml"
REGISTRY_HTTP_ADDR=127.0.0.1:$port REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY=$work/data docker-registry serve "$work/config.yml" >/dev/null 2>&1 &
registry_pid=$!
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.3f}')"; }
t0=$(now)
"$tool" bundle generate --version 9.9.9 --metadata "$root/config/manifests/metadata.yaml" --output "$work/bundles" 2>/dev/null
t1=$(now)
"$tool" bundle build "$work/bundles/9.9.9" --push "127.0.0.1:$port/bench/bundle:v9.9.9" >/dev/null 2>&1
t2=$(now)
echo "generate+validate $(secs "$t0" "$t1") s, build+validate+push $(secs "$t1" "$t2") s, total $(secs "$t0" "$t2") s (target <= 1 s)"
static="$root/target/x86_64-unknown-linux-gnu/release/model-orchestra-operator"
if [ -x "$static" ]; then
  t3=$(now)
  "$tool" image build --binary "$static" --push "127.0.0.1:$port/bench/operator:v9.9.9" >/dev/null 2>&1
  t4=$(now)
  size=$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$port/bench/operator:v9.9.9" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]))')
  echo "operator image: build+push $(secs "$t3" "$t4") s, $size bytes compressed (target <= 25 MB), binary $(stat -c %s "$static") bytes"
fi
