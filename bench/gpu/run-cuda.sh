#!/usr/bin/env bash
# bench/gpu/run-cuda.sh — the CUDA benchmark, on a GPU machine without node or network, from the repository root, with
# the kit built here by scripts/gpu-bench-kit (.gpu, or GPU_KIT) and the CUDA provider's parts by
# ../shared/gpu-kit/make-cuda-parts.sh (.gpu-cuda, or GPU_CUDA_KIT: carried one part a call before this run, see
# docs/performance.md "CUDA"; the device tool brings back 8 files at most: tar the arms' JSONs). Under 8 minutes on
# one H200: M2M100-418M shapes, random weights, 16 new tokens per row, parts BATCHxBEAMS (GPU_PARTS, default 1x1,64x1,64x2,256x1):
#   1. the model: fp32 graphs by the project's builders, then their `_fp16` files (engine/float16.ts)
#   2. PyTorch (transformers generate, fp32 and fp16, on cuda) on the same rows                 -> $OUT/gpu-torch.json
#   3. the engine on onnxruntime 1.29's CUDA provider:
#      the search graph (one run per batch) fp16 and fp32                         -> $OUT/gpu-cuda-search-{fp16,fp32}.json
#      the search graph fp16 with 2 runs in flight (64x1, 256x1)                        -> $OUT/gpu-cuda-search-fp16-x2.json
#      the step loop fp32 (every step's caches through the host)                         -> $OUT/gpu-cuda-steps-fp32.json
#      and on onnxruntime 1.30's WebGPU provider (Vulkan), the step loop fp32               -> $OUT/gpu-webgpu-steps.json
#   4. the step loop on the CPU (every core; 64x1, 64x2): the rows whose tokens the fp32 arms must equal
#                                                                                               -> $OUT/gpu-cpu-steps.json
#   5. served: the whole stack (built-in front, router cluster, model server, workers on GPU 0), fp16, GENERATION=auto,
#      closed-loop clients through the front at 1/64/256 with 1/2/4 workers on the GPU         -> $OUT/gpu-served.json
#   6. ratios: every arm ÷ torch fp16/fp32, rows equal to the CPU's, served ÷ the fp16 search graph
#                                                                                               -> $OUT/gpu-summary.json
# Each step is bounded by `timeout`; a part past its arm's deadline is skipped and named in the JSON.
set -uo pipefail
cd "$(dirname "$0")/../.."
KIT_DIR="${GPU_KIT:-.gpu}"
CUDA_KIT="${GPU_CUDA_KIT:-.gpu-cuda}"
OUT="${OUT:-./out}"
PARTS="${GPU_PARTS:-1x1,64x1,64x2,256x1}"
NEW_TOKENS="${GPU_NEW_TOKENS:-16}"
RUNS="${GPU_RUNS:-3}"
SERVED_LEVELS="${GPU_SERVED_LEVELS:-1,64,256}"
SERVED_WORKERS="${GPU_SERVED_WORKERS:-1,2,4}"
PRESET="${GPU_PRESET:-m2m100-418m}"
# Which steps run (GPU_ARMS, default all): torch, cuda-search-fp16, cuda-search-fp16-x2, cuda-search-fp32,
# cuda-steps-fp32, webgpu-steps (the step loop on the WebGPU provider, fp32; about 80 s), cpu-steps, served.
ARMS_WANTED=",${GPU_ARMS:-torch,cuda-search-fp16,cuda-search-fp16-x2,cuda-search-fp32,cuda-steps-fp32,webgpu-steps,cpu-steps,served},"
want() { [[ "$ARMS_WANTED" == *",$1,"* ]]; }
# A smoke test on a CPU-only machine: GPU_EP=cpu runs every arm on the CPU provider (fp16 arms fail: onnxruntime's
# CPU BeamSearch is float32), with GPU_PRESET=tiny.
EP="${GPU_EP:-cuda}"
# shellcheck source=bench/gpu/common.sh
source bench/gpu/common.sh
gpu_start

step "kit"
gpu_kit
if [[ "$EP" == cuda ]]; then
  set +u
  # shellcheck source=/dev/null
  source "$(ls -d "$CUDA_KIT"/p*/ | tail -1)cuda-env.sh"
  set -u
fi
# The bundle beside a node_modules holding the CUDA build of onnxruntime-node (ESM resolves from the file's folder).
RUN_DIR="$KIT_WORK/cuda-run"
mkdir -p "$RUN_DIR"
rm -f "$RUN_DIR/node_modules" && ln -s "${KIT_CUDA_NODE_MODULES:-$KIT_NODE_MODULES}" "$RUN_DIR/node_modules"
xz -dc "$KIT_DIR/engine.mjs.xz" >"$RUN_DIR/engine.mjs"
ENGINE=("$KIT_NODE" "$RUN_DIR/engine.mjs")

MODEL="${GPU_MODEL_DIR:-$KIT_WORK/$PRESET}"
step "model: prep, the two fp32 graphs in parallel, then their fp16 files ($MODEL)"
gpu_model || exit 1
timeout 120 "${ENGINE[@]}" fp16 --model "$MODEL" || echo "fp16 files: FAILED"
ls -la "$MODEL/onnx"

want torch && step "PyTorch reference" && TORCH_INPUTS="$OUT/gpu-prep.json" TORCH_PARTS="$PARTS" TORCH_NEW_TOKENS="$NEW_TOKENS" TORCH_RUNS="$RUNS" \
  TORCH_OUT="$OUT/gpu-torch.json" TORCH_DEADLINE_S=70 timeout 100 python3 "$KIT_DIR/torch-m2m100.py" >/dev/null

bench() {
  local name="$1" limit="$2"
  shift 2
  want "$name" || return 0
  step "engine: $name"
  timeout "$limit" "${ENGINE[@]}" bench --model "$MODEL" --ep "$EP" --prep "$OUT/gpu-prep.json" \
    --new-tokens "$NEW_TOKENS" --runs "$RUNS" --out "$OUT/gpu-$name.json" "$@"
}
bench cuda-search-fp16 90 --search in-graph --dtype fp16 --parts "$PARTS" --deadline-s 70
bench cuda-search-fp16-x2 60 --search in-graph --dtype fp16 --in-flight 2 --parts 64x1,256x1 --deadline-s 40
bench cuda-search-fp32 90 --search in-graph --dtype fp32 --parts "$PARTS" --deadline-s 70
bench cuda-steps-fp32 90 --dtype fp32 --parts 1x1,64x1,64x2 --threads 2 --deadline-s 70
# WebGPU (Vulkan) runs on the kit's onnxruntime-node 1.30, beside which the kit unpacked the bundle's first copy.
if want webgpu-steps && [[ "$EP" == cuda ]]; then
  step "engine: webgpu-steps"
  xz -dc "$KIT_DIR/engine.mjs.xz" >"$KIT_WORK/engine.mjs"
  timeout 150 "$KIT_NODE" "$KIT_WORK/engine.mjs" bench --model "$MODEL" --ep webgpu --prep "$OUT/gpu-prep.json" \
    --parts "$PARTS" --new-tokens "$NEW_TOKENS" --runs 2 --threads 2 --deadline-s 120 --out "$OUT/gpu-webgpu-steps.json"
fi
want cpu-steps && step "engine on the CPU (every core): the reference tokens" && timeout 90 "${ENGINE[@]}" bench --model "$MODEL" --ep cpu --prep "$OUT/gpu-prep.json" --parts 64x1,64x2 \
  --new-tokens "$NEW_TOKENS" --runs 1 --threads 0 --deadline-s 60 --out "$OUT/gpu-cpu-steps.json"

want served && step "served through the front" && STACK="$KIT_WORK/stack" &&
  rm -rf "$STACK" && mkdir -p "$STACK" && xz -dc "$KIT_DIR/stack.tar.xz" | tar -C "$STACK" -xf - &&
  ln -s "${KIT_CUDA_NODE_MODULES:-$KIT_NODE_MODULES}/onnxruntime-node" \
    "${KIT_CUDA_NODE_MODULES:-$KIT_NODE_MODULES}/onnxruntime-common" "$STACK/node_modules/" &&
  (cd "$STACK" && timeout 200 "$KIT_NODE" dist/bench/gpu/served.js --model "$MODEL" --out "$OUT/gpu-served.json" \
    --concurrency "$SERVED_LEVELS" --workers "$SERVED_WORKERS" --new-tokens "$NEW_TOKENS" --window-s 5 \
    --dtype fp16 --generation auto --deadline-s 180 $([[ "$EP" == cuda ]] || echo --allow-cpu))

step "summary"
ARMS=()
for name in cuda-search-fp16 cuda-search-fp16-x2 cuda-search-fp32 cuda-steps-fp32 webgpu-steps cpu-steps; do
  [[ -f "$OUT/gpu-$name.json" ]] && ARMS+=(--arm "$name=$OUT/gpu-$name.json")
done
SERVED=()
[[ -f "$OUT/gpu-served.json" ]] && SERVED=(--served "$OUT/gpu-served.json" --served-vs cuda-search-fp16)
TORCH=()
[[ -f "$OUT/gpu-torch.json" ]] && TORCH=(--torch "$OUT/gpu-torch.json")
"${ENGINE[@]}" summary "${ARMS[@]}" --reference cpu-steps "${TORCH[@]}" "${SERVED[@]}" --out "$OUT/gpu-summary.json"
rm -f "$OUT/gpu-prep.json"
step "done"
