#!/usr/bin/env bash
# Benchmark: bundle generate + validate + build + push to a loopback docker-registry, with the
# binaries already built (`make build`). Prints wall time per step and in total, and the
# compressed size of the operator image when a static binary exists (`make static`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/bench.sh
. "$root/scripts/lib/bench.sh"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.3f}')"; }
t0=$(now)
"$tool" bundle generate --version 9.9.9 --metadata "$root/config/manifests/metadata.yaml" --output "$work/bundles" 2>/dev/null
t1=$(now)
"$tool" bundle build "$work/bundles/9.9.9" --push "127.0.0.1:$port/bench/bundle:v9.9.9" >/dev/null 2>&1
t2=$(now)
echo "generate+validate $(secs "$t0" "$t1") s, build+validate+push $(secs "$t1" "$t2") s, total $(secs "$t0" "$t2") s (target <= 1 s)"
static="$cargo_target/x86_64-unknown-linux-gnu/release/model-orchestra-operator"
if [ -x "$static" ]; then
  t3=$(now)
  "$tool" image build --binary "$static" --push "127.0.0.1:$port/bench/operator:v9.9.9" >/dev/null 2>&1
  t4=$(now)
  size=$(skopeo inspect --raw --tls-verify=false "docker://127.0.0.1:$port/bench/operator:v9.9.9" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]))')
  echo "operator image: build+push $(secs "$t3" "$t4") s, $size bytes compressed (target <= 25 MB), binary $(stat -c %s "$static") bytes"
fi
