/**
 * @module engine/step — one decoder step of one cohort: its feeds (last tokens, encoder states, caches, masks),
 * the decoder run, the search decision on its scores, and the self-attention cache for the next step.
 *
 * A run reads the cohort and writes nothing into it (the feeds wrap the cohort's arrays; onnxruntime only reads
 * inputs): until `stepCohort` applies a successful run, the cohort is as it was, so a failed run can be retried
 * with other rows (generate.ts).
 */
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { BEAM_HEAD_OUTPUTS } from '../beam-head.js';
import { type Cohort, type CohortContext, disposeDevice } from './cohort.js';
import { copyRows } from './cohort-layout.js';
import { BEAM_TOPK } from '../graphs/decoder-graph.js';
import { decideStep, type SearchState, type StepDecision, type StepScores } from '../decoding.js';
import { candidates, type DecoderRun, hostBytesOf, tokenFeeds, topkOf } from './decoder-run.js';
import { runOnDevice } from './step-device.js';
import type { HostSessions } from '../session.js';
import type { EngineSession } from '../float16.js';

export type { DecoderRun } from './decoder-run.js';

/** Run the decoder once over `cohort`'s rows without changing the cohort. @throws whatever onnxruntime throws */
export function runDecoder(ctx: CohortContext, cohort: Cohort): Promise<DecoderRun> {
  const { sessions } = ctx;
  return sessions.kind === 'device' ? runOnDevice(ctx, sessions, cohort) : runOnHost(ctx, sessions, cohort);
}

/**
 * `runDecoder` with the state on the host: the decoder's feeds built from the cohort's arrays (the whole prefix
 * again for a decoder without cache), the cross graph run first at a split decoder's first step, and the scores
 * fetched as the graph offers them: its greedy top-2, its beam top-k, or the logits (through the beam head).
 */
async function runOnHost(ctx: CohortContext, sessions: HostSessions, cohort: Cohort): Promise<DecoderRun> {
  const { rows } = cohort;
  const n = rows.length;
  const d = ctx.config.dModel;
  const S = cohort.encoderLength;
  const cached = sessions.decoderKind === 'merged';
  // With the cache a step feeds each row's last token; without it, the whole prefix again.
  const T = cached ? 1 : 1 + rows[0]!.hyp.tokens.length;
  const { feeds, selfMask } = tokenFeeds(ctx, cohort, T);
  const inputs = sessions.decoderInputs;
  const states = new ort.Tensor('float32', cohort.encoderStates, [n, S, d]);
  // The step graph of a split decoder reads the cross-attention cache instead of the encoder's states.
  if (inputs.has('encoder_hidden_states')) feeds.encoder_hidden_states = states;
  if (ctx.feedsEncoderMask) feeds.encoder_attention_mask = new ort.Tensor('int64', cohort.encoderMask, [n, S]);
  const P = cohort.pastLength;
  const H = ctx.heads;
  const dh = ctx.headDim;
  const first = cohort.crossCache === null;
  const { appendedCache, greedyTop2, beamTopK, crossAttention } = sessions.decoderOutputs;
  // All-greedy steps fetch the decoder's top-2 (4 values per row) instead of vocab logits per row; not when a row has
  // bad words, which with a suppressed `</s>` could fill both places.
  const top2 =
    greedyTop2 !== null &&
    rows.every((r) => r.state.settings.strategy === 'greedy' && !r.state.settings.suppressTokenIds?.length)
      ? greedyTop2
      : null;
  // Beam steps with the beam head in the graph fetch its top-k instead of the logits.
  const k = top2 === null && beamTopK && sessions.beamHead !== null ? candidates(ctx, rows) : 0;
  if (beamTopK) beamSwitch(feeds, k);
  const fetches =
    top2 !== null
      ? [top2.values, top2.ids]
      : k > 0
        ? [BEAM_TOPK.values, BEAM_TOPK.ids, BEAM_TOPK.logSumExp]
        : ['logits'];
  // The graph computes the attention whatever is fetched; only a cohort holding a row that keeps it copies it out.
  const attention = crossAttention !== null && rows.some((row) => row.state.keepsAttention) ? crossAttention : null;
  if (attention !== null) fetches.push(attention);
  const started = performance.now();
  const splitCross = cached ? sessions.cross : null;
  const made =
    splitCross !== null && first ? await runCross(ctx, splitCross, { ...feeds, encoder_hidden_states: states }) : null;
  const cross = made?.cross ?? null;
  let hostBytes = made?.hostBytes ?? 0;
  if (inputs.has('use_cache_branch') || splitCross !== null) {
    if (splitCross === null)
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(cached && !first ? 1 : 0), [1]);
    const empty = new Float32Array(0);
    const cache = (data: Float32Array, length: number) =>
      new ort.Tensor('float32', data, [n, H, data === empty ? 0 : length, dh]);
    for (let i = 0; i < ctx.layers; i++) {
      ['key', 'value'].forEach((part, j) => {
        const self = cached && cohort.selfCache !== null ? cohort.selfCache[2 * i + j]! : empty;
        feeds[`past_key_values.${i}.decoder.${part}`] = cache(self, P);
        const past = cross?.[2 * i + j] ?? (cached && !first ? cohort.crossCache![2 * i + j]! : empty);
        feeds[`past_key_values.${i}.encoder.${part}`] = cache(past, S);
        if (cached) {
          fetches.push(appendedCache?.[2 * i + j] ?? `present.${i}.decoder.${part}`);
          if (first && splitCross === null) fetches.push(`present.${i}.encoder.${part}`);
        }
      });
    }
  }
  const out = await sessions.decoder.run(feeds, fetches);
  hostBytes += hostBytesOf(Object.values(feeds)) + hostBytesOf(Object.values(out));
  let topk = k > 0 ? topkOf(out, BEAM_TOPK, k) : null;
  const logits = out.logits;
  // Logits wider than the vocabulary (padded columns) are left to the scan, which stops at vocab_size.
  if (top2 === null && sessions.beamHead !== null && logits !== undefined && logits.dims[2] === ctx.config.vocabSize) {
    const k = candidates(ctx, rows);
    const headFeeds = { logits, k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]) };
    const made = await sessions.beamHead.run(headFeeds);
    hostBytes += hostBytesOf([headFeeds.k]) + hostBytesOf(Object.values(made));
    topk = topkOf(made, BEAM_HEAD_OUTPUTS, k);
  }
  const attended = attention === null ? undefined : (out[attention]!.data as Float32Array);
  return { out, selfMask, top2, topk, cross, attention: attended, ms: performance.now() - started, hostBytes };
}

/** A split decoder's first step: the cross graph makes each layer's `present.*.encoder.*` from what it reads of `feeds`. */
async function runCross(ctx: CohortContext, session: EngineSession, feeds: Record<string, ort.Tensor>) {
  const crossFeeds: Record<string, ort.Tensor> = {};
  for (const [name, tensor] of Object.entries(feeds)) if (session.inputNames.includes(name)) crossFeeds[name] = tensor;
  const made = await session.run(crossFeeds);
  const cross = Array.from({ length: 2 * ctx.layers }, (_, k) => {
    const name = `present.${k >> 1}.encoder.${k % 2 === 0 ? 'key' : 'value'}`;
    return made[name]!.data as Float32Array;
  });
  return { cross, hostBytes: hostBytesOf(Object.values(crossFeeds)) + hostBytesOf(Object.values(made)) };
}

/** Feed the decoder graph's beam switch: its top-`k` outputs computed (k > 0) or left empty. */
function beamSwitch(feeds: Record<string, ort.Tensor>, k: number): void {
  feeds[BEAM_TOPK.on] = new ort.Tensor('bool', Uint8Array.of(k > 0 ? 1 : 0), [1]);
  feeds[BEAM_TOPK.k] = new ort.Tensor('int64', BigInt64Array.of(BigInt(Math.max(k, 1))), [1]);
}

/** Free what a trial run of the copy `trial` made on the device, and the copy's own device tensors. */
function releaseTrial(trial: Cohort, run: DecoderRun | null): void {
  if (run?.device !== undefined) for (const tensor of run.device.self) tensor.dispose();
  disposeDevice(trial.onDevice);
}

/**
 * After a decoder run of `cohort` failed with `error`: the sequences it fails on alone, each with its own error.
 * Halves of the cohort's sequences are run on copies (the cohort untouched), down to single sequences, a
 * sequence's beams always together: about 2·log2(sequences) trial runs per bad sequence, on this path only. Empty
 * when every part runs (an error of the batch as a whole).
 */
export async function failingSequences(
  ctx: CohortContext,
  cohort: Cohort,
  error: unknown,
): Promise<Map<SearchState, Error>> {
  const sequences: number[][] = [];
  cohort.rows.forEach((row, i) => {
    if (i > 0 && cohort.rows[i - 1]!.state === row.state) sequences[sequences.length - 1]!.push(i);
    else sequences.push([i]);
  });
  const failing = new Map<SearchState, Error>();
  const search = async (group: number[][], known: unknown): Promise<void> => {
    if (group.length === 1) {
      const state = cohort.rows[group[0]![0]!]!.state;
      failing.set(state, known instanceof Error ? known : new Error(String(known)));
      return;
    }
    const half = Math.ceil(group.length / 2);
    for (const part of [group.slice(0, half), group.slice(half)]) {
      const trial = await copyRows(ctx, cohort, part.flat());
      let run: DecoderRun | null = null;
      try {
        run = await runDecoder(ctx, trial);
      } catch (err) {
        await search(part, err);
      } finally {
        releaseTrial(trial, run);
      }
    }
  };
  await search(sequences, error);
  return failing;
}

/**
 * Apply a successful decoder run of `cohort`: count it, decide every row's successors, and build the cache the
 * next step feeds. The caller resolves `done` and lays the rows out as `next` says (a reorder of beams within their
 * sequences is applied here, in the cache's own copy: `next` then says every row stays).
 */
export function stepCohort(ctx: CohortContext, cohort: Cohort, run: DecoderRun): StepDecision {
  const { stats } = ctx;
  const { out } = run;
  const n = cohort.rows.length;
  stats.decoderMs += run.ms;
  stats.decoderRuns++;
  stats.decoderRows += n;
  stats.decoderHostBytes += run.hostBytes;
  cohort.steps++;
  if (run.attention) keepAttention(cohort, run.attention);

  const deciding = performance.now();
  const decision = decideStep(cohort.rows, run.topk ?? stepScores(ctx, out, run.top2), ctx.config.eosTokenId);
  stats.searchMs += performance.now() - deciding;

  if (ctx.sessions.decoderKind !== 'merged') return decision;
  if (run.device !== undefined) {
    // The run's present cache replaces the past it was built from.
    for (const tensor of cohort.onDevice?.self ?? []) tensor.dispose();
    cohort.onDevice = run.device;
    cohort.pastLength += 1;
    cohort.selfMask = run.selfMask;
    return decision;
  }
  const building = performance.now();
  const H = ctx.heads;
  const dh = ctx.headDim;
  const P = cohort.pastLength;
  const { appendedCache } = ctx.sessions.decoderOutputs;
  const first = cohort.crossCache === null;
  const past = cohort.selfCache;
  const buffers = cohort.cacheBuffers;
  const selfCache: Float32Array[] = [];
  // Beams reordered within their sequences and no row leaving: the append's copy takes each row's cache from its
  // parent, and nothing else changes (the cross cache, encoder tensors and masks are each sequence's own).
  const rows = cohort.rows;
  const next = decision.next;
  let sources: Int32Array | undefined;
  if (
    appendedCache !== null &&
    buffers !== null &&
    next.length === n &&
    next.some((s, i) => s.source !== i) &&
    next.every((s, i) => rows[s.source]!.state === rows[i]!.state)
  ) {
    sources = new Int32Array(n * H);
    next.forEach((s, r) => {
      for (let h = 0; h < H; h++) sources![r * H + h] = s.source * H + h;
    });
    decision.next = next.map((s, i) => ({ source: i, row: s.row }));
  }
  for (let i = 0; i < ctx.layers; i++) {
    ['key', 'value'].forEach((part, j) => {
      const k = 2 * i + j;
      if (appendedCache === null || buffers === null) {
        selfCache.push(out[`present.${i}.decoder.${part}`]!.data as Float32Array);
        return;
      }
      // One copy of the cache per step, into a buffer the past is not in (kv-cache.ts).
      const appended = out[appendedCache[k]!]!.data as Float32Array;
      selfCache.push(buffers.append(k, past?.[k] ?? new Float32Array(0), appended, n * H, P, dh, sources));
      // A past re-laid out by a gather or merge was copied in: its memory is free.
      if (past?.[k] !== undefined) ctx.memory.recycleLoose(cohort, k, past[k]);
    });
  }
  cohort.selfCache = selfCache;
  stats.layoutMs += performance.now() - building;
  if (first) {
    cohort.crossCache = run.cross ?? [];
    for (let i = 0; run.cross === null && i < ctx.layers; i++) {
      for (const part of ['key', 'value'])
        cohort.crossCache.push(out[`present.${i}.encoder.${part}`]!.data as Float32Array);
    }
  }
  cohort.pastLength = P + 1;
  cohort.selfMask = run.selfMask;
  return decision;
}

/**
 * A step's cross-attention (`[n, 1, S]`) added to the trail of each row that keeps it, its source's own positions
 * (right-padded): before the step is decided, so that the hypotheses it makes carry it on.
 */
function keepAttention(cohort: Cohort, attention: Float32Array): void {
  const S = cohort.encoderLength;
  cohort.rows.forEach(({ state, hyp }, r) => {
    if (!state.keepsAttention) return;
    hyp.attention = { row: attention.slice(r * S, r * S + cohort.encoderLengths[r]!), prev: hyp.attention };
  });
}

/** The last position's scores per row from a decoder run: its top-2 outputs or its logits. */
function stepScores(
  ctx: CohortContext,
  out: ort.InferenceSession.ReturnType,
  top2: { values: string; ids: string } | null,
): StepScores {
  if (top2 !== null) {
    const values = out[top2.values];
    const ids = out[top2.ids];
    if (values === undefined || ids === undefined) throw new Error('decoder returned no top-2 outputs');
    const stride = values.dims[1]! * 2;
    return {
      kind: 'top2',
      values: values.data as Float32Array,
      ids: ids.data as BigInt64Array,
      stride,
      offset: stride - 2,
    };
  }
  const logits = out.logits;
  if (logits === undefined) throw new Error('decoder returned no logits');
  const stride = logits.dims[1]! * logits.dims[2]!;
  return {
    kind: 'logits',
    data: logits.data as Float32Array,
    stride,
    offset: stride - logits.dims[2]!,
    vocab: Math.min(ctx.config.vocabSize, logits.dims[2]!),
  };
}
