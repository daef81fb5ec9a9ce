#!/usr/bin/env bash
# bench/gpu/run.sh — the GPU benchmark, on a GPU machine without node or network, from the repository root, with the
# kit built here by scripts/gpu-bench-kit (in .gpu, or GPU_KIT). Under 8 minutes on one H200: M2M100-418M shapes with
# random weights (the project's own graph builders), fp32, 16 new tokens per row, parts BATCHxBEAMS (GPU_PARTS,
# default 1x1,64x1,64x2,256x1: batch 1 / 64 greedy, batch 64 beam 2, the engine's largest continuous batch):
#   1. the PyTorch reference (transformers generate, fp32 and fp16, on cuda) on the same rows   -> $OUT/gpu-torch.json
#   2. the engine on onnxruntime's WebGPU provider (Vulkan)                                      -> $OUT/gpu-engine-webgpu.json
#   3. a profiled pass of the engine on WebGPU per part of GPU_PROFILE_PARTS (default 64x1,256x1: host-bound, GPU-bound):
#      kernels and GPU time per decoder step by operator and program (onnxruntime's profile)
#                                                                                  -> $OUT/gpu-profile-webgpu-PART.json
#   4. the engine on the CPU provider (every core; GPU_CPU_PARTS, default 64x1,64x2, one timed call: the rows whose
#      tokens WebGPU must equal)                                                                -> $OUT/gpu-engine-cpu.json
#   5. served: the whole stack (built-in front, router cluster, model server, workers on GPU 0 by setup_config.json)
#      from the kit's compiled tree (stack.tar.xz), closed-loop clients through the front at GPU_SERVED_LEVELS
#      (default 1,64,256), with GPU_SERVED_WORKERS worker processes on the GPU (default 1,2)   -> $OUT/gpu-served.json
#   6. ratios (engine ÷ torch fp16/fp32, webgpu ÷ cpu, served ÷ engine), rows with equal tokens, host bytes per row-step
#                                                                                                -> $OUT/gpu-summary.json
# Each step is bounded by `timeout`; a part past its arm's deadline is skipped and named in the JSON.
set -uo pipefail
cd "$(dirname "$0")/../.."
KIT_DIR="${GPU_KIT:-.gpu}"
OUT="${OUT:-./out}"
PARTS="${GPU_PARTS:-1x1,64x1,64x2,256x1}"
NEW_TOKENS="${GPU_NEW_TOKENS:-16}"
RUNS="${GPU_RUNS:-2}"
PROFILE_PARTS="${GPU_PROFILE_PARTS:-64x1,256x1}"
CPU_PARTS="${GPU_CPU_PARTS:-64x1,64x2}"
SERVED_LEVELS="${GPU_SERVED_LEVELS:-1,64,256}"
SERVED_WORKERS="${GPU_SERVED_WORKERS:-1,2}"
# A smoke test on a CPU-only machine: GPU_PRESET=tiny GPU_SOFTWARE=1 (lavapipe) with a kit whose kit-env.sh points at
# this machine's node.
PRESET="${GPU_PRESET:-m2m100-418m}"
SOFTWARE=()
[[ "${GPU_SOFTWARE:-0}" == 1 ]] && SOFTWARE=(--software)
# shellcheck source=bench/gpu/common.sh
source bench/gpu/common.sh
gpu_start

step "kit"
gpu_kit
xz -dc "$KIT_DIR/engine.mjs.xz" >"$KIT_WORK/engine.mjs"
ENGINE=("$KIT_NODE" "$KIT_WORK/engine.mjs")

MODEL="${GPU_MODEL_DIR:-$KIT_WORK/$PRESET}"
step "model: prep + the two fp32 graphs in parallel ($MODEL)"
gpu_model || exit 1
ls -la "$MODEL/onnx"

step "PyTorch reference"
TORCH_INPUTS="$OUT/gpu-prep.json" TORCH_PARTS="$PARTS" TORCH_NEW_TOKENS="$NEW_TOKENS" TORCH_RUNS="$RUNS" \
  TORCH_OUT="$OUT/gpu-torch.json" TORCH_DEADLINE_S=70 timeout 100 python3 "$KIT_DIR/torch-m2m100.py" >/dev/null

step "engine on WebGPU"
timeout 200 "${ENGINE[@]}" bench --model "$MODEL" --ep webgpu "${SOFTWARE[@]}" --prep "$OUT/gpu-prep.json" --parts "$PARTS" \
  --new-tokens "$NEW_TOKENS" --runs "$RUNS" --threads 2 --deadline-s 120 --out "$OUT/gpu-engine-webgpu.json"

# One process a part: a profile sums every run of its process.
for part in ${PROFILE_PARTS//,/ }; do
  step "engine on WebGPU, profiled at $part"
  timeout 90 "${ENGINE[@]}" bench --model "$MODEL" --ep webgpu "${SOFTWARE[@]}" --prep "$OUT/gpu-prep.json" \
    --parts "$part" --new-tokens "$NEW_TOKENS" --runs 1 --threads 2 --deadline-s 60 --profile \
    --out "$OUT/gpu-profile-webgpu-$part.json"
done

step "engine on the CPU"
timeout 120 "${ENGINE[@]}" bench --model "$MODEL" --ep cpu --prep "$OUT/gpu-prep.json" --parts "$CPU_PARTS" \
  --new-tokens "$NEW_TOKENS" --runs 1 --threads 0 --deadline-s 70 --out "$OUT/gpu-engine-cpu.json"

step "served through the front"
STACK="$KIT_WORK/stack"
rm -rf "$STACK" && mkdir -p "$STACK" && xz -dc "$KIT_DIR/stack.tar.xz" | tar -C "$STACK" -xf - &&
  ln -s "$KIT_NODE_MODULES/onnxruntime-node" "$KIT_NODE_MODULES/onnxruntime-common" "$STACK/node_modules/" &&
  (cd "$STACK" && timeout 240 "$KIT_NODE" dist/bench/gpu/served.js --model "$MODEL" --out "$OUT/gpu-served.json" \
    --concurrency "$SERVED_LEVELS" --workers "$SERVED_WORKERS" --new-tokens "$NEW_TOKENS" --deadline-s 200 "${SOFTWARE[@]}")
SERVED=()
[[ -f "$OUT/gpu-served.json" ]] && SERVED=(--served "$OUT/gpu-served.json" --served-vs webgpu)

step "summary"
"${ENGINE[@]}" summary --arm webgpu="$OUT/gpu-engine-webgpu.json" --arm cpu="$OUT/gpu-engine-cpu.json" --reference cpu \
  --torch "$OUT/gpu-torch.json" "${SERVED[@]}" --out "$OUT/gpu-summary.json"
rm -f "$OUT/gpu-prep.json"
step "done"
