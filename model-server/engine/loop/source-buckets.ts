/**
 * @module engine/source-buckets — which admitted rows the encoder runs together. One encoder call over a
 * mixed-length batch pads every row to the longest: on the benchmark workload (8–48 tokens, mean 28)
 * that is 1.7× the real work. Rows are therefore encoded in groups of similar length (policy here; the
 * step loop runs them and scatters the states back into one right-padded cohort tensor).
 */

/** Padding a group may add over its real tokens before a longer row starts a new group. */
export const MAX_PADDING = 0.15;
/** Tokens (rows × padded length) a group needs before it may be closed: smaller GEMMs run slower. */
export const MIN_GROUP_TOKENS = 256;

/**
 * Group row indices by source length: rows sorted by length, a new group started when the next (longer)
 * row would pad the current one past `MAX_PADDING` of its real tokens and the current one already holds
 * `MIN_GROUP_TOKENS`. Every index appears once; each group is in ascending length.
 */
export function sourceBuckets(lengths: readonly number[]): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const groups: number[][] = [];
  let group: number[] = [];
  let real = 0;
  for (const row of order) {
    const length = lengths[row]!;
    const longest = group.length > 0 ? lengths[group[group.length - 1]!]! : 0;
    const paddedNow = group.length * longest;
    const paddedWith = (group.length + 1) * length;
    if (group.length > 0 && paddedNow >= MIN_GROUP_TOKENS && paddedWith > (real + length) * (1 + MAX_PADDING)) {
      groups.push(group);
      group = [];
      real = 0;
    }
    group.push(row);
    real += length;
  }
  if (group.length > 0) groups.push(group);
  return groups;
}
