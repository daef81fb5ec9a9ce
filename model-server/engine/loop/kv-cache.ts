/**
 * @module engine/kv-cache — the self-attention cache of a cohort, built step by step in reused memory.
 * Each step the decoder returns only the entries it appends (decoder-graph.ts); `CacheBuffers.append`
 * writes past + appended into the half of the tensor's buffer that does not hold the past and returns an
 * exact-length view of it for the next step's feed. Buffers come from a `CacheBufferPool` shared by every
 * cohort of one engine, so a new batch reuses the memory of the last one instead of allocating (and
 * page-faulting) it again.
 *
 * Invariants:
 * - one buffer per cache tensor, its two halves used in turn (ping-pong): the result never overlaps the
 *   `past` it was built from, whatever memory that past lives in (a previous result, or a fresh array after a
 *   gather/merge); past and result in one buffer let the copy run without allocating (`copyWithin`);
 * - a returned view stays valid until the second following `append` of the same tensor, which may reuse
 *   its half: the cohort keeps exactly one view per tensor (its current past) and hands it back as the
 *   next `past`; gathers and merges copy rows out into other memory before the views are reused;
 * - `recycle` takes back memory its holder drops — a pooled buffer whole, or an array alone in its own
 *   memory (a decoder output) — so re-laid-out tensors (cohort-layout.ts) reuse memory too; a cohort's cache
 *   buffers are never recycled, only released;
 * - a cohort's buffers go back to the pool only when the cohort is gone (`release`), never while one of
 *   its views may still be fed;
 * - a buffer too small for the next cache goes back to the pool and is replaced by the best-fitting free
 *   one, or a new one sized for the expected length (else 1.5× what is needed): a generation allocates
 *   once per buffer when it stays within the expected length, O(log length) times otherwise, and a
 *   batch like an earlier one allocates nothing;
 * - the pool keeps at most `maxFree` free buffers (dropping the smallest), a bound on the memory it holds
 *   between batches.
 */

/** Capacity growth when a buffer is too small: room for ~50% more positions before the next allocation. */
const GROWTH = 1.5;

/**
 * Free cache buffers of one engine, kept for the next batch as onnxruntime's arena keeps its own memory.
 * Holds at most `maxFree` buffers, the largest: about the cache memory of the largest recent batches.
 */
export class CacheBufferPool {
  readonly #free: Float32Array[] = [];
  readonly #maxFree: number;
  /** Memory this pool handed out: a view of it goes back whole (`recycle`). */
  readonly #owned = new WeakSet<ArrayBufferLike>();

  /** @param maxFree buffers kept free at most (a cohort returns 2 per cache tensor) */
  constructor(maxFree: number) {
    this.#maxFree = Math.max(0, Math.floor(maxFree));
  }

  /** Floats held by free buffers. */
  get freeFloats(): number {
    return this.#free.reduce((sum, b) => sum + b.length, 0);
  }

  /** The smallest free buffer that holds `length` floats, else a new one of `allocate` (≥ length) floats. */
  take(length: number, allocate = Math.ceil(length * GROWTH)): Float32Array {
    const at = this.#free.findIndex((b) => b.length >= length);
    if (at >= 0) return this.#free.splice(at, 1)[0]!;
    const buffer = new Float32Array(Math.max(length, allocate));
    this.#owned.add(buffer.buffer);
    return buffer;
  }

  /**
   * Keep the memory behind `array`, which its holder drops: a view of a buffer this pool handed out goes back
   * whole; an array alone in its own memory (a decoder output, a fresh array) is adopted. Anything else (a view
   * into memory something else may hold) is left to the garbage collector. The caller must hold no other view
   * of that memory.
   */
  recycle(array: Float32Array): void {
    if (array.length === 0) return;
    const memory = array.buffer;
    if (this.#owned.has(memory)) this.give(new Float32Array(memory));
    else if (
      array.byteOffset === 0 &&
      array.byteLength === memory.byteLength &&
      !(memory instanceof SharedArrayBuffer)
    ) {
      this.#owned.add(memory);
      this.give(array);
    }
  }

  /** Keep `buffer` for a later `take` (the caller holds no view of it any more). */
  give(buffer: Float32Array): void {
    // Given twice, one buffer would be taken by two holders at once.
    if (buffer.length === 0 || this.#free.some((b) => b.buffer === buffer.buffer)) return;
    // Sorted ascending: take() finds the best fit first, and the smallest is dropped when full.
    let at = this.#free.length;
    while (at > 0 && this.#free[at - 1]!.length > buffer.length) at--;
    this.#free.splice(at, 0, buffer);
    if (this.#free.length > this.#maxFree) this.#free.shift();
  }
}

/** One cohort's cache buffers: per cache tensor, one buffer whose two halves alternate, taken from the engine's pool. */
export class CacheBuffers {
  readonly #pool: CacheBufferPool;
  readonly #expectedPositions: number;
  /** Per cache tensor, its buffer (empty until first needed); each step writes the half the past is not in. */
  readonly #slots: Float32Array[];

  /**
   * @param tensors cache tensors per step (2 per decoder layer: key and value)
   * @param expectedPositions cache length a new buffer is sized for at least (the caller's guess of the
   *   final length, capped), so a generation that reaches it allocates once instead of growing ×1.5 from 1
   */
  constructor(pool: CacheBufferPool, tensors: number, expectedPositions = 1) {
    this.#pool = pool;
    this.#expectedPositions = Math.max(1, Math.floor(expectedPositions));
    this.#slots = Array.from({ length: tensors }, () => new Float32Array(0));
  }

  /** Floats held by this cohort's buffers. */
  get heldFloats(): number {
    return this.#slots.reduce((sum, b) => sum + b.length, 0);
  }

  /**
   * Tensor `k`'s next cache `[rowsHeads, pastLength + T, dh]`: each of the `rowsHeads` (rows × heads) blocks
   * is its `pastLength` past positions followed by its `T` appended ones.
   * @param past `[rowsHeads, pastLength, dh]` (may be empty when pastLength is 0)
   * @param appended `[rowsHeads, T, dh]`, what the decoder step computed
   * @param sources when given, block b of the result continues block `sources[b]` of `past` and `appended` (beams
   *   reordered by parent in the same copy); else block b
   * @throws RangeError when the lengths do not match those shapes
   */
  append(
    k: number,
    past: Float32Array,
    appended: Float32Array,
    rowsHeads: number,
    pastLength: number,
    dh: number,
    sources?: Int32Array,
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
    const length = rowsHeads * span;
    const { memory, at, pastAt, outgrown } = this.#place(k, past, length, rowsHeads * this.#expectedPositions * dh);
    // Within one buffer the past moves by copyWithin, which allocates nothing: per-block subarray views (two per
    // block, ~50k per step at batch 64 on the 418M shapes) filled the young generation and cost more in
    // scavenges than the copy itself.
    if (sources !== undefined && sources.length !== rowsHeads) {
      throw new RangeError(`cache tensor ${k}: ${sources.length} source blocks for ${rowsHeads} blocks`);
    }
    // The past is in the other half of the buffer or elsewhere: reading any block of it never meets a written one.
    if (pastAt >= 0) {
      for (let block = 0; block < rowsHeads; block++) {
        const from = pastAt + (sources?.[block] ?? block) * pastSpan;
        memory.copyWithin(at + block * span, from, from + pastSpan);
      }
    } else if (pastSpan > 0) {
      for (let block = 0; block < rowsHeads; block++) {
        const from = (sources?.[block] ?? block) * pastSpan;
        memory.set(past.subarray(from, from + pastSpan), at + block * span);
      }
    }
    for (let block = 0; block < rowsHeads; block++) {
      const to = at + block * span + pastSpan;
      const from = (sources?.[block] ?? block) * appendedSpan;
      for (let i = 0; i < appendedSpan; i++) memory[to + i] = appended[from + i]!;
    }
    // Given back only now: the past may have been read from it.
    if (outgrown !== null) this.#pool.give(outgrown);
    return memory.subarray(at, at + length);
  }

  /** Whether `view` lies in tensor `k`'s buffer (then only `release` may give that memory back). */
  holds(k: number, view: Float32Array): boolean {
    const slot = this.#slots[k];
    return slot !== undefined && slot.length > 0 && slot.buffer === view.buffer;
  }

  /** Give every buffer back to the pool. Only once the cohort is gone: no view of them may be fed again. */
  release(): void {
    for (let k = 0; k < this.#slots.length; k++) {
      this.#pool.give(this.#slots[k]!);
      this.#slots[k] = new Float32Array(0);
    }
  }

  /**
   * Where tensor k's next cache of `length` floats goes: the half of its buffer the past is not in (`at`), and
   * where the past starts in that buffer (`pastAt`, −1 when it lies elsewhere). A buffer whose halves are too
   * small is replaced by a larger one; the old one (`outgrown`) still holds the past and goes back to the pool
   * once it has been read.
   */
  #place(
    k: number,
    past: Float32Array,
    length: number,
    expected: number,
  ): { memory: Float32Array; at: number; pastAt: number; outgrown: Float32Array | null } {
    const slot = this.#slots[k];
    if (slot === undefined) throw new RangeError(`cache tensor ${k} out of range (${this.#slots.length} tensors)`);
    const half = slot.length >> 1;
    const inSlot = slot.length > 0 && past.length > 0 && past.buffer === slot.buffer;
    const pastAt = inSlot ? (past.byteOffset - slot.byteOffset) / Float32Array.BYTES_PER_ELEMENT : -1;
    if (half >= length) return { memory: slot, at: pastAt >= 0 && pastAt < half ? half : 0, pastAt, outgrown: null };
    const grown = this.#pool.take(2 * length, 2 * Math.max(Math.ceil(length * GROWTH), expected));
    this.#slots[k] = grown;
    // The past is read from the outgrown buffer through a view (`pastAt` −1): it is not in the new one.
    return { memory: grown, at: 0, pastAt: -1, outgrown: slot.length > 0 ? slot : null };
  }
}
