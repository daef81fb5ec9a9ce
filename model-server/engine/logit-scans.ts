/**
 * @module engine/logit-scans — the host's passes over one row of a step's logits, the search's hot loops
 * (decoding.ts): vocabulary × rows per step when the decoder graph gives no top-k of its own.
 */
/** Index of the largest of `logits[base … base+vocab)`; -1 when every value is NaN. */
export function argmax(logits: Float32Array, base: number, vocab: number): number {
  let best = -Infinity;
  let index = -1;
  for (let v = 0; v < vocab; v++) {
    const value = logits[base + v]!;
    if (value > best) {
      best = value;
      index = v;
    }
  }
  return index;
}

/** `argmax` over the tokens `suppressed` allows. */
export function argmaxAllowed(
  logits: Float32Array,
  base: number,
  vocab: number,
  suppressed: (t: number) => boolean,
): number {
  let best = -Infinity;
  let index = -1;
  for (let v = 0; v < vocab; v++) {
    const value = logits[base + v]!;
    if (value > best && !suppressed(v)) {
      best = value;
      index = v;
    }
  }
  return index;
}

/** log Σ exp over one row of logits (the log-softmax normaliser). */
export function logSumExp(logits: Float32Array, base: number, vocab: number): number {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) if (logits[base + v]! > max) max = logits[base + v]!;
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(logits[base + v]! - max);
  return max + Math.log(sum);
}
