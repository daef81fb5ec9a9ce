# bench/gpu/common.sh — what run.sh and run-cuda.sh share, sourced after OUT and KIT_DIR are set.
#   gpu_start:  OUT made absolute (the served arm runs from the unpacked stack's folder), everything logged to
#               $OUT/gpu-bench.log, `step` printing each stage with the seconds since the start
#   gpu_kit:    the kit's node and onnxruntime-node (kit-env.sh, which reads unset variables: sourced without -u), the
#               engine workers' allocator settings, the GPU named in the log
#   gpu_model:  after ENGINE, MODEL and PRESET are set: the fixed rows (gpu-prep.json) and the preset's two fp32
#               graphs, written in parallel by the project's own builders (the 418M pair is 2.4 GB: made there, not
#               carried)
gpu_start() {
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  exec > >(tee -a "$OUT/gpu-bench.log") 2>&1
  t0=$(date +%s)
}

step() { echo "== $* ($(($(date +%s) - t0)) s)"; }

gpu_kit() {
  set +u
  # shellcheck source=/dev/null
  source "$KIT_DIR/kit-env.sh"
  set -u
  export MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
}

gpu_model() {
  timeout 60 "${ENGINE[@]}" prep --model "$MODEL" --preset "$PRESET" --rows 256 --out "$OUT/gpu-prep.json" || return 1
  timeout 120 "${ENGINE[@]}" graph --model "$MODEL" --preset "$PRESET" --part encoder &
  local encoder=$!
  timeout 120 "${ENGINE[@]}" graph --model "$MODEL" --preset "$PRESET" --part decoder &
  local decoder=$!
  # By pid: a bare `wait` would also wait for the log's tee.
  wait "$encoder" "$decoder"
}
