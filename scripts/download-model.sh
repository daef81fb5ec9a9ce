#!/usr/bin/env bash
# Fetch a real M2M100 ONNX export (Hugging Face layout) into models/<name> for hosts with internet.
#
#   scripts/download-model.sh [repo] [outDir]      default: Xenova/m2m100_418M → models/m2m100_418M
#   DTYPES="fp32 q8 fp16" scripts/download-model.sh   which variants (default "fp32 q8"), each under its own
#                                                      published name: *.onnx, *_quantized.onnx, *_fp16.onnx
#   HF_ENDPOINT=https://hf-mirror.example scripts/download-model.sh
#
# Then serve it: MODEL_DIR=models/m2m100_418M scripts/start.sh new. MODEL_DTYPE (auto by default: q8 on the
# CPU, fp16 on CUDA, when present) picks which files the engine loads; see docs/configuration.md "Real exports". The per-row
# int8 (q8-rows) is not published: make it with node dist/model-server/cli.js quantize --model-dir DIR --dtype q8-rows.
set -euo pipefail
repo="${1:-Xenova/m2m100_418M}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${2:-$root/models/${repo##*/}}"
endpoint="${HF_ENDPOINT:-https://huggingface.co}"
suffixes=()
for dtype in ${DTYPES:-fp32 q8}; do
  case "$dtype" in
    fp32) suffixes+=("") ;;
    q8 | quantized) suffixes+=("_quantized") ;;
    fp16) suffixes+=("_fp16") ;;
    *) echo "DTYPES: each of fp32, q8, fp16 (got $dtype)" >&2; exit 2 ;;
  esac
done

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
for suffix in "${suffixes[@]}"; do
  for f in encoder_model decoder_model_merged; do
    fetch "onnx/${f}${suffix}.onnx"
    fetch "onnx/${f}${suffix}.onnx_data" optional # large exports keep weights beside the graph
  done
done
echo "Done. Serve it with MODEL_DIR=$out (real translations; the generated demo models only stand in for this)."
