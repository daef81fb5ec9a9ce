/**
 * @module model-server/text/starts-matcher — the longest pattern that starts at each place of a text, for every place
 * in one pass: an Aho-Corasick automaton (Aho & Corasick, "Efficient string matching", 1975) of the patterns read
 * backwards, fed the text from its end to its start.
 *
 * Fed so, the reversed patterns the automaton finds ending at a place (along the failure links of its state there)
 * are the patterns that start at that place in the text, longest first; each state keeps the longest of each
 * group. Building costs the patterns' total length, feeding one symbol amortized constant time, whatever the number
 * and length of the patterns.
 */

/** No pattern. */
export const NONE = -1;

/** A pattern: symbols (non-negative integers below 2^31), and the group it is counted in (0 or 1). */
export interface StartPattern {
  readonly symbols: readonly number[];
  readonly group: 0 | 1;
}

const ROOT = 0;
// No state: the root is no state's child, sibling or edge's end, so 0 says "none" there; typed arrays start at 0,
// which spares filling them (filling the table took as long as building the trie). Patterns are stored plus one.
const ABSENT = 0;

/**
 * The automaton. Feed a text's symbols from the last to the first, starting from `ROOT_STATE`: after the symbols of
 * a place, `longest(state, group)` is the index of the longest pattern of that group starting there, or NONE.
 */
export class StartsMatcher {
  static readonly ROOT_STATE = ROOT;
  readonly #edges: EdgeTable;
  readonly #fail: Int32Array;
  /** Per group, per state: the longest pattern plus one, or ABSENT. */
  readonly #longest: [Int32Array, Int32Array];

  /** Of patterns with the same symbols, the first is the one reported. */
  constructor(patterns: readonly StartPattern[]) {
    const size = 1 + patterns.reduce((sum, pattern) => sum + pattern.symbols.length, 0);
    const edges = new EdgeTable(size);
    // Per state: the symbol into it, its next sibling, its first child (to walk the trie breadth first), its pattern.
    const symbol = new Int32Array(size);
    const sibling = new Int32Array(size);
    const child = new Int32Array(size);
    const ends = new Int32Array(size);
    let states = 1;
    patterns.forEach(({ symbols }, p) => {
      let state = ROOT;
      for (let i = symbols.length - 1; i >= 0; i--) {
        const next = edges.getOrAdd(state, symbols[i]!, states);
        if (next === states) {
          states++;
          symbol[next] = symbols[i]!;
          sibling[next] = child[state]!;
          child[state] = next;
        }
        state = next;
      }
      if (ends[state] === ABSENT) ends[state] = p + 1;
    });
    const fail = new Int32Array(states);
    const longest: [Int32Array, Int32Array] = [new Int32Array(states), new Int32Array(states)];
    // Breadth first, so that a state's failure (a shorter text) is done before it.
    const queue = new Int32Array(states);
    let tail = 0;
    for (let c = child[ROOT]!; c !== ABSENT; c = sibling[c]!) queue[tail++] = c;
    for (let head = 0; head < tail; head++) {
      const state = queue[head]!;
      const own = ends[state]!;
      const group = own === ABSENT ? NONE : patterns[own - 1]!.group;
      longest[0][state] = group === 0 ? own : longest[0][fail[state]!]!;
      longest[1][state] = group === 1 ? own : longest[1][fail[state]!]!;
      for (let c = child[state]!; c !== ABSENT; c = sibling[c]!) {
        fail[c] = state === ROOT ? ROOT : this.#step(edges, fail, fail[state]!, symbol[c]!);
        queue[tail++] = c;
      }
    }
    this.#edges = edges;
    this.#fail = fail;
    this.#longest = longest;
  }

  /** The state after `symbol`, the one before it in the text. */
  next(state: number, symbol: number): number {
    return this.#step(this.#edges, this.#fail, state, symbol);
  }

  /** The longest pattern of `group` starting at the place whose symbols `state` has read last, or NONE. */
  longest(state: number, group: 0 | 1): number {
    return this.#longest[group][state]! - 1;
  }

  // Its edge, else its failure's, and so on up to the root.
  #step(edges: EdgeTable, fail: Int32Array, state: number, symbol: number): number {
    for (;;) {
      const next = edges.get(state, symbol);
      if (next !== ABSENT || state === ROOT) return next;
      state = fail[state]!;
    }
  }
}

/**
 * The trie's edges, (state, symbol) → state: open addressing in one typed array sized once, each slot's fields side
 * by side (one cache miss a probe; a Map keyed by a number past 2^31 took three times as long to build). The hash is
 * seeded per table, so that no set of terms can be chosen ahead to collide.
 */
class EdgeTable {
  // Slot i: [3i] the state the edge leaves plus one (ABSENT: a free slot), [3i + 1] its symbol, [3i + 2] its end.
  readonly #slots: Int32Array;
  readonly #mask: number;
  readonly #seed = (Math.random() * 0x100000000) | 0;

  constructor(maxEdges: number) {
    // At most three quarters full.
    let capacity = 16;
    while (capacity * 3 < 4 * maxEdges) capacity *= 2;
    this.#slots = new Int32Array(3 * capacity);
    this.#mask = capacity - 1;
  }

  /** The state the edge enters, or ABSENT. */
  get(from: number, symbol: number): number {
    const slots = this.#slots;
    for (let slot = this.#slot(from, symbol); ; slot = (slot + 1) & this.#mask) {
      const at = slots[3 * slot]!;
      if (at === ABSENT) return ABSENT;
      if (at === from + 1 && slots[3 * slot + 1] === symbol) return slots[3 * slot + 2]!;
    }
  }

  /** The state the edge enters; when there is no such edge yet, it is made, entering `to`. */
  getOrAdd(from: number, symbol: number, to: number): number {
    const slots = this.#slots;
    let slot = this.#slot(from, symbol);
    for (; slots[3 * slot] !== ABSENT; slot = (slot + 1) & this.#mask) {
      if (slots[3 * slot] === from + 1 && slots[3 * slot + 1] === symbol) return slots[3 * slot + 2]!;
    }
    slots[3 * slot] = from + 1;
    slots[3 * slot + 1] = symbol;
    slots[3 * slot + 2] = to;
    return to;
  }

  // murmur3's finalizer over the pair.
  #slot(from: number, symbol: number): number {
    let h = Math.imul(from ^ this.#seed, 0x9e3779b1) ^ symbol;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return (h ^ (h >>> 16)) & this.#mask;
  }
}
