#!/usr/bin/env bash
# Benchmark: render a 200-bundle semver template from a loopback docker-registry with
# bundle-tool and with the real opm (`opm alpha render-template semver --use-http`), side by
# side in the same run, cold and warm. bundle-tool cold = empty digest cache (every bundle
# image pulled), warm = cache filled (one manifest HEAD per tag). opm keeps no cache between
# runs: its cold is the first run, its warm the second (registry and page cache warm).
# 200 bundles = versions 1.0.0 … 2.9.9 (2 majors × 10 minors × 10 patches), all in Stable, the
# last 50 also in Fast, major and minor channels. Setup (generate + push 200 bundles) is not
# timed. Uses the release bundle-tool when built (`cargo build --release -p bundle-tool`) and
# opm from target/tools/bin (built by `scripts/build-go-tools.sh opm`, a no-op when cached).
# The outputs of both are compared byte for byte. Set BENCH_RUNS=N to time N warm runs each
# (the median is reported).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/bench.sh
. "$root/scripts/lib/bench.sh"
"$root/scripts/build-go-tools.sh" opm
opm="$root/target/tools/bin/opm"
# opm refuses to pull without a containers policy, read from $HOME: a temp HOME, never yours.
mkdir -p "$work/home/.config/containers"
echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$work/home/.config/containers/policy.json"

repo=127.0.0.1:$port/bench/bundle
versions=()
pushes=()
for major in 1 2; do for minor in $(seq 0 9); do for patch in $(seq 0 9); do versions+=("$major.$minor.$patch"); done; done; done
echo "setup: generating and pushing ${#versions[@]} bundles…"
# One generated bundle, re-versioned per release (name and spec.version), so setup stays short.
"$tool" bundle generate --version 1.0.0 --metadata "$root/config/manifests/metadata.yaml" --output "$work/seed" 2>/dev/null
{
  echo "schema: olm.semver"; echo "generateMajorChannels: true"; echo "generateMinorChannels: true"
  echo "stable:"; echo "  bundles:"
  for v in "${versions[@]}"; do echo "  - image: $repo:v$v"; done
  echo "fast:"; echo "  bundles:"
  for v in "${versions[@]:150}"; do echo "  - image: $repo:v$v"; done
} > "$work/template.yaml"
for v in "${versions[@]}"; do
  dir="$work/bundles/$v"
  mkdir -p "$dir"
  cp -r "$work/seed/1.0.0/metadata" "$dir/"
  mkdir "$dir/manifests"
  sed -e "s/model-orchestra-operator.v1.0.0/model-orchestra-operator.v$v/" -e "s/^  version: 1.0.0$/  version: $v/" \
    "$work/seed/1.0.0/manifests/model-orchestra-operator.clusterserviceversion.yaml" > "$dir/manifests/model-orchestra-operator.clusterserviceversion.yaml"
  "$tool" bundle build "$dir" --push "$repo:v$v" >/dev/null 2>&1 &
  pushes+=($!)
  # Two pushes at a time (the registry is a job too, so wait on pushes only).
  if [ ${#pushes[@]} -ge 2 ]; then wait "${pushes[@]}"; pushes=(); fi
done
[ ${#pushes[@]} -eq 0 ] || wait "${pushes[@]}"
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.3f}')"; }
ratio() { python3 -c "print(f'{$1/$2:.1f}')"; }
median() { python3 -c "import statistics,sys; print(f'{statistics.median(float(x) for x in sys.argv[1:]):.3f}')" "$@"; }
run() { /usr/bin/time -f "%M" -o "$work/rss" "$tool" catalog render "$work/template.yaml" --cache-dir "$work/cache" -o "$work/out/$1.yaml" 2>"$work/$1.log"; }
run_opm() { HOME="$work/home" /usr/bin/time -f "%M" -o "$work/rss" "$opm" alpha render-template semver --use-http -o yaml "$work/template.yaml" >"$work/out/opm-$1.yaml" 2>"$work/opm-$1.log"; }
mkdir -p "$work/out"
t0=$(now); run cold; t1=$(now)
cold_rss=$(cat "$work/rss")
t2=$(now); run warm; t3=$(now)
warm_rss=$(cat "$work/rss")
o0=$(now); run_opm cold; o1=$(now)
opm_cold_rss=$(cat "$work/rss")
o2=$(now); run_opm warm; o3=$(now)
opm_warm_rss=$(cat "$work/rss")
cmp -s "$work/out/cold.yaml" "$work/out/warm.yaml" || { echo "cold and warm renders differ"; exit 1; }
cmp -s "$work/out/opm-warm.yaml" "$work/out/warm.yaml" || { echo "bundle-tool and opm renders differ"; exit 1; }
tail -1 "$work/warm.log"
mkdir "$work/valid" && cp "$work/out/warm.yaml" "$work/valid/"
"$tool" catalog validate "$work/valid" && echo "rendered catalog valid: $(grep -c '^schema: olm.channel' "$work/out/warm.yaml") channels, $(grep -c '^schema: olm.bundle' "$work/out/warm.yaml") bundles, $(stat -c %s "$work/out/warm.yaml") bytes, identical to opm's"
bt_cold=$(secs "$t0" "$t1") bt_warm=$(secs "$t2" "$t3") opm_cold=$(secs "$o0" "$o1") opm_warm=$(secs "$o2" "$o3")
runs=${BENCH_RUNS:-1}
if [ "$runs" -gt 1 ]; then
  bt=() op=()
  for _ in $(seq "$runs"); do
    a=$(now); run warm; b=$(now); bt+=("$(secs "$a" "$b")")
    a=$(now); run_opm warm; b=$(now); op+=("$(secs "$a" "$b")")
  done
  bt_warm=$(median "${bt[@]}") opm_warm=$(median "${op[@]}")
  echo "warm: median of $runs runs each"
fi
echo "bundle-tool: cold render $bt_cold s (peak RSS $((cold_rss / 1024)) MiB), warm render $bt_warm s (peak RSS $((warm_rss / 1024)) MiB; target warm <= 2 s)"
echo "opm:         cold render $opm_cold s (peak RSS $((opm_cold_rss / 1024)) MiB), warm render $opm_warm s (peak RSS $((opm_warm_rss / 1024)) MiB)"
echo "bundle-tool vs opm: cold $(ratio "$opm_cold" "$bt_cold")x faster (target >= 1x), warm $(ratio "$opm_warm" "$bt_warm")x faster (target >= 10x)"
