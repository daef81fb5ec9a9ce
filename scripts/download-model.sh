#!/usr/bin/env bash
# Fetch a real M2M100 ONNX export (Hugging Face layout) into models/<name> for hosts with internet.
#
#   scripts/download-model.sh [repo] [outDir]      default: Xenova/m2m100_418M → models/m2m100_418M
#   DTYPE=quantized scripts/download-model.sh      the int8 files (*_quantized.onnx) instead of fp32
#   HF_ENDPOINT=https://hf-mirror.example scripts/download-model.sh
#
# Then serve it: MODEL_DIR=models/m2m100_418M scripts/start.sh new
# (the engine loads onnx/encoder_model.onnx and onnx/decoder_model_merged.onnx; see docs/engine.md).
set -euo pipefail
repo="${1:-Xenova/m2m100_418M}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${2:-$root/models/${repo##*/}}"
endpoint="${HF_ENDPOINT:-https://huggingface.co}"
suffix=""
case "${DTYPE:-fp32}" in
  fp32) suffix="" ;;
  quantized) suffix="_quantized" ;;
  fp16) suffix="_fp16" ;;
  *) echo "DTYPE must be fp32, quantized or fp16" >&2; exit 2 ;;
esac

fetch() { # fetch <path in repo> [optional]
  local file="$1" dest="$out/$1"
  mkdir -p "$(dirname "$dest")"
  echo "  $file"
  if ! curl -fL --retry 3 --retry-delay 2 -o "$dest.part" "$endpoint/$repo/resolve/main/$file"; then
    rm -f "$dest.part"
    if [[ "${2:-}" == optional ]]; then return 0; fi
    echo "download failed: $endpoint/$repo/resolve/main/$file" >&2
    exit 1
  fi
  mv "$dest.part" "$dest"
}

echo "Downloading $repo into $out"
for f in config.json generation_config.json tokenizer.json tokenizer_config.json; do fetch "$f"; done
fetch special_tokens_map.json optional
for f in encoder_model decoder_model_merged; do
  fetch "onnx/${f}${suffix}.onnx"
  fetch "onnx/${f}${suffix}.onnx_data" optional # large exports keep weights beside the graph
done
if [[ -n "$suffix" ]]; then
  # The engine loads the fp32 names: link the chosen variant under them.
  for f in encoder_model decoder_model_merged; do ln -sf "${f}${suffix}.onnx" "$out/onnx/${f}.onnx"; done
fi
echo "Done. Serve it with MODEL_DIR=$out (real translations; the generated demo models only stand in for this)."
