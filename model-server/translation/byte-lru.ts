/**
 * @module model-server/translation/byte-lru — a least-recently-used map bounded by the bytes its entries say they
 * take, not by their count: translations vary from a word to a paragraph, so a count bound says nothing about memory.
 *
 * A JavaScript Map iterates in insertion order; an entry read is deleted and set again, so the first key is always
 * the least recently used and eviction takes from the front. Every operation is O(1) except eviction, which is
 * O(entries evicted).
 */

export class ByteLru<V> {
  readonly #entries = new Map<string, { value: V; bytes: number }>();
  #bytes = 0;

  /** @param maxBytes the bound; 0 stores nothing. */
  constructor(readonly maxBytes: number) {
    if (!(Number.isInteger(maxBytes) && maxBytes >= 0)) throw new RangeError(`maxBytes must be ≥ 0, got ${maxBytes}`);
  }

  /** Bytes the entries held now say they take (always ≤ maxBytes). */
  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value, which becomes the most recently used; undefined when absent. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /**
   * Store `value` as the most recently used, evicting the least recently used entries until it fits.
   * @returns false (and nothing stored or evicted) when the entry alone is larger than the bound.
   */
  set(key: string, value: V, bytes: number): boolean {
    if (bytes > this.maxBytes) return false;
    this.delete(key);
    while (this.#bytes + bytes > this.maxBytes) {
      const oldest = this.#entries.keys().next().value as string;
      this.delete(oldest);
    }
    this.#entries.set(key, { value, bytes });
    this.#bytes += bytes;
    return true;
  }

  delete(key: string): boolean {
    const entry = this.#entries.get(key);
    if (entry === undefined) return false;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
    return true;
  }

  /** Keys from least to most recently used. */
  keys(): string[] {
    return [...this.#entries.keys()];
  }
}
