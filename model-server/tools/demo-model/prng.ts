/**
 * @module tools/demo-model/prng — the fixed-seed random numbers behind generated weights.
 *
 * Every tensor draws from its own stream, seeded from (model seed, tensor name), so a tensor's values do
 * not depend on the order tensors are built in: the tied embedding comes out identical in the encoder and
 * decoder files, and a large tensor can be produced chunk by chunk while it is being written.
 */

/** FNV-1a over the UTF-16 code units of `text`, folded with `seed`: a 32-bit stream seed. */
export function streamSeed(seed: number, text: string): number {
  let hash = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * mulberry32: a small, fast 32-bit generator (Tommy Ettinger's construction). Plenty for weights that
 * only need to be deterministic and roughly uniform.
 */
export class Mulberry32 {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Fill `out` with uniform values of standard deviation `std` around zero. */
  fillUniform(out: Float32Array, std: number): void {
    const halfWidth = std * Math.sqrt(3);
    for (let i = 0; i < out.length; i++) out[i] = (this.next() * 2 - 1) * halfWidth;
  }
}
