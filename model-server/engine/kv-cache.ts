/**
 * @module engine/kv-cache — one cohort's self-attention cache in reusable buffers. Each step the decoder
 * returns only the entries it appends (decoder-graph.ts); `append` writes past + appended into a buffer
 * that does not hold the past, and returns an exact-length view of it for the next step's feed.
 *
 * Invariants:
 * - two buffers per cache tensor (ping-pong): the result never shares memory with the `past` it was built
 *   from, whatever buffer that past lives in (a previous result, or a fresh array after a gather/merge);
 * - a returned view stays valid until the second following `append` of the same tensor, which may reuse
 *   its buffer: callers keep exactly one view per tensor (the cohort's current past) and hand it back as
 *   the next `past`; gathers and merges copy rows out into fresh arrays before the views are reused;
 * - buffers grow geometrically (×1.5 past what is needed) and never shrink while the cohort lives, so once
 *   a generation has reached its length a step allocates nothing.
 */

/** Capacity growth when a buffer is too small: room for ~50% more positions before the next allocation. */
const GROWTH = 1.5;

export class CacheBuffers {
  /** Per cache tensor, its two buffers (empty until first needed). */
  readonly #slots: [Float32Array, Float32Array][];
  #allocatedFloats = 0;

  /** @param tensors cache tensors per step (2 per decoder layer: key and value) */
  constructor(tensors: number) {
    this.#slots = Array.from({ length: tensors }, () => [new Float32Array(0), new Float32Array(0)]);
  }

  /** Floats held by every buffer (for tests and memory accounting). */
  get allocatedFloats(): number {
    return this.#allocatedFloats;
  }

  /**
   * Tensor `k`'s next cache `[rowsHeads, pastLength + T, dh]`: each of the `rowsHeads` (rows × heads) blocks
   * is its `pastLength` past positions followed by its `T` appended ones.
   * @param past `[rowsHeads, pastLength, dh]` (may be empty when pastLength is 0)
   * @param appended `[rowsHeads, T, dh]`, what the decoder step computed
   * @throws RangeError when the lengths do not match those shapes
   */
  append(
    k: number,
    past: Float32Array,
    appended: Float32Array,
    rowsHeads: number,
    pastLength: number,
    dh: number,
  ): Float32Array {
    const pastSpan = pastLength * dh;
    if (past.length !== rowsHeads * pastSpan) {
      throw new RangeError(
        `cache tensor ${k}: past holds ${past.length} floats, expected ${rowsHeads}×${pastLength}×${dh}`,
      );
    }
    const appendedSpan = appended.length / rowsHeads;
    if (!Number.isInteger(appendedSpan) || appendedSpan === 0 || appendedSpan % dh !== 0) {
      throw new RangeError(`cache tensor ${k}: appended holds ${appended.length} floats, not ${rowsHeads}×T×${dh}`);
    }
    const span = pastSpan + appendedSpan;
    const out = this.#target(k, past, rowsHeads * span);
    for (let block = 0; block < rowsHeads; block++) {
      const at = block * span;
      if (pastSpan > 0) out.set(past.subarray(block * pastSpan, (block + 1) * pastSpan), at);
      out.set(appended.subarray(block * appendedSpan, (block + 1) * appendedSpan), at + pastSpan);
    }
    return out;
  }

  /** An exact-length view of tensor k's buffer that does not hold `past`, grown if needed. */
  #target(k: number, past: Float32Array, length: number): Float32Array {
    const slots = this.#slots[k];
    if (slots === undefined) throw new RangeError(`cache tensor ${k} out of range (${this.#slots.length} tensors)`);
    const index = slots[0].buffer === past.buffer && slots[0].length > 0 ? 1 : 0;
    let buffer = slots[index];
    if (buffer.length < length) {
      this.#allocatedFloats -= buffer.length;
      buffer = new Float32Array(Math.ceil(length * GROWTH));
      this.#allocatedFloats += buffer.length;
      slots[index] = buffer;
    }
    return buffer.subarray(0, length);
  }
}
