# bench/gpu/model.sh — sourced by run.sh and run-cuda.sh after ENGINE (the driver bundle and the node that runs it),
# MODEL, PRESET and OUT are set: the fixed rows (gpu-prep.json) and the preset's two fp32 graphs, written in parallel
# by the project's own builders (the 418M pair is 2.4 GB: made there, not carried).
gpu_model() {
  timeout 60 "${ENGINE[@]}" prep --model "$MODEL" --preset "$PRESET" --rows 256 --out "$OUT/gpu-prep.json" || return 1
  timeout 120 "${ENGINE[@]}" graph --model "$MODEL" --preset "$PRESET" --part encoder &
  local encoder=$!
  timeout 120 "${ENGINE[@]}" graph --model "$MODEL" --preset "$PRESET" --part decoder &
  local decoder=$!
  # By pid: a bare `wait` would also wait for the log's tee.
  wait "$encoder" "$decoder"
}
