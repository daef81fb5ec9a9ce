/**
 * @module engine/decoding — the search policy: which token (greedy) or hypotheses (beam search) follow each decoder
 * row, given its next-token logits. No tensors or sessions: the step loop (loop/generate.ts) owns those.
 *
 * Semantics follow Hugging Face `generate`: the first generated token is forced where the family names the target by a
 * token (M2M100, NLLB, mBART: the target language, log-probability 0; Marian forces nothing); `</s>` is suppressed
 * until `minNewTokens` tokens exist, and a model's `bad_words_ids` of one token always (Marian's `<pad>`); a row stops
 * at `</s>` or after `maxNewTokens` tokens, the last of them `forced_eos_token_id` where generation_config.json names
 * one (and the row has no glossary terms). Beam search follows HF's BeamSearchScorer: 2·numBeams candidates per
 * sequence; a `</s>` candidate ranked below numBeams is dropped; a finished hypothesis scores sum(logprob) /
 * length^lengthPenalty (length = generated tokens, `</s>` included); with `earlyStopping` a sequence is done once
 * numBeams hypotheses finished, otherwise once no live beam can beat the worst finished one. A sequence with a
 * glossary's target terms (constraints.ts) takes only the tokens they allow: a started term is forced to its end, and
 * `</s>` becomes the start of an unmet term.
 */
import { NO_PROGRESS, type ConstraintProgress, type Constraints } from './constraints.js';
import type { TranslateOptions } from './engine-options.js';
import { argmax, argmaxAllowed, logSumExp } from './logit-scans.js';

type ResolvedOption = 'strategy' | 'numBeams' | 'maxNewTokens' | 'minNewTokens' | 'lengthPenalty' | 'earlyStopping';

/** Per-sequence generation settings, resolved (no undefined; the engine's `#settings`). */
export interface SearchSettings extends Required<Pick<TranslateOptions, ResolvedOption>> {
  /** The first generated token, or `NO_FORCED_TOKEN` where the model chooses it (Marian). */
  forcedTokenId: number;
  /** Tokens never generated (generation_config.json's one-token `bad_words_ids`); absent: none. */
  suppressTokenIds?: readonly number[];
  /** The token written at a row's last allowed step (generation_config.json's `forced_eos_token_id`); absent: none. */
  forcedEosTokenId?: number;
  /** Token sequences every hypothesis must contain before it ends; absent for most rows. */
  constraints?: Constraints;
}

/** `forcedTokenId` of a row whose first token the model chooses (a family without language tokens). */
export const NO_FORCED_TOKEN = -1;

/** One finished or best hypothesis of a sequence. */
export interface Hypothesis {
  /** Generated tokens (forced language token first; `</s>` last when the model stopped). */
  tokens: number[];
  /** Sum of token log-probabilities (0 for greedy rows, which never need it). */
  logprob: number;
  /** How far it is through its sequence's constraints (absent: none met, none started). */
  progress?: ConstraintProgress;
  /** On a sequence's answer: every finished hypothesis kept, best first (itself first). */
  ranked?: readonly ScoredHypothesis[];
  /**
   * What the decoder attended to as it wrote each token, last first, for a sequence that keeps it for its word
   * alignment: the step loop adds a live row's before the step is decided (loop/step.ts), and a successor carries its
   * parent's on.
   */
  attention?: AttentionTrail;
}

/** One step's cross-attention of a hypothesis (`[S]`), and the steps before it. */
export interface AttentionTrail {
  row: Float32Array;
  prev: AttentionTrail | undefined;
}

/** A finished hypothesis with its length-normalised score (what beam search ranks by). */
export interface ScoredHypothesis {
  hyp: Hypothesis;
  score: number;
}

/** A translation in progress: its live rows are `Row`s of one cohort; `finished` collects beam results. */
export class SearchState {
  /** Finished hypotheses with their length-normalised scores, best first, at most numBeams. */
  readonly finished: ScoredHypothesis[] = [];
  done = false;

  /**
   * @param keepsAttention its rows' hypotheses carry what the decoder attended to (`Hypothesis.attention`), for its
   *   word alignment: the step loop adds it to them (loop/step.ts)
   */
  constructor(
    readonly settings: SearchSettings,
    readonly keepsAttention = false,
  ) {}

  /** The answer once `done`. */
  best(): Hypothesis {
    const top = this.finished[0];
    if (top === undefined) throw new Error('sequence has no finished hypothesis');
    return top.hyp;
  }

  /** `length`: what the score divides by; the generated tokens unless the caller says otherwise. */
  addFinished(hyp: Hypothesis, length = hyp.tokens.length): void {
    const score = hyp.logprob / length ** this.settings.lengthPenalty;
    const { finished } = this;
    if (finished.length >= this.settings.numBeams && score <= finished[finished.length - 1]!.score) return;
    let at = finished.length;
    while (at > 0 && finished[at - 1]!.score < score) at--;
    finished.splice(at, 0, { hyp, score });
    if (finished.length > this.settings.numBeams) finished.pop();
  }
}

/** A live decoder row: one hypothesis of one sequence. */
export interface Row {
  state: SearchState;
  hyp: Hypothesis;
}

/** What a step decided: successor rows (with the index of the row whose cache they continue). */
export interface StepDecision {
  next: { source: number; row: Row }[];
  /** Sequences that finished at this step (each exactly once). */
  done: SearchState[];
}

/** Row `r`'s logits `data[offset + r·stride … +vocab)`, or its top-2 (`values`/`ids[offset + r·stride + 0|1]`). */
export type StepScores =
  | { kind: 'logits'; data: Float32Array; stride: number; offset: number; vocab: number }
  | { kind: 'top2'; values: Float32Array; ids: BigInt64Array; stride: number; offset: number }
  /**
   * The beam head's (beam-head.ts): row `r`'s `k` best logits `values`/`ids[r·k … +k)`, best first (ties: lower
   * id first, as the logits scan), and its log-softmax normaliser `logSumExp[r]`.
   */
  | { kind: 'topk'; values: Float32Array; ids: Int32Array; logSumExp: Float32Array; k: number };

/**
 * Decide the successors of `rows` from their next-token scores. Successors of one sequence stay adjacent and in rank
 * order, so a batch's layout is deterministic.
 * @throws Error when a beam sequence is given top-2 scores (beam search needs every logit)
 */
export function decideStep(rows: readonly Row[], scores: StepScores, eosId: number): StepDecision {
  const next: StepDecision['next'] = [];
  const done: SearchState[] = [];
  let i = 0;
  while (i < rows.length) {
    const state = rows[i]!.state;
    let end = i + 1;
    while (end < rows.length && rows[end]!.state === state) end++;
    if (state.settings.strategy === 'greedy') {
      for (let r = i; r < end; r++) greedy(rows[r]!, r, scores, eosId, next, done);
    } else if (scores.kind !== 'top2') {
      beam(rows, i, end, scores, eosId, next, done);
    } else {
      throw new Error('beam search needs the full logits, not top-2 scores');
    }
    i = end;
  }
  return { next, done };
}

function greedy(
  row: Row,
  index: number,
  scores: StepScores,
  eosId: number,
  next: StepDecision['next'],
  done: SearchState[],
): void {
  const { hyp, state } = row;
  const { settings } = state;
  const generated = hyp.tokens.length;
  const constraints = settings.constraints;
  const progress = hyp.progress ?? NO_PROGRESS;
  const forced = constraints?.forced(progress, settings.maxNewTokens - generated);
  let token: number;
  if (generated === 0 && settings.forcedTokenId !== NO_FORCED_TOKEN) {
    token = settings.forcedTokenId;
  } else if (forced !== undefined) {
    token = forced;
  } else if (
    settings.forcedEosTokenId !== undefined &&
    generated === settings.maxNewTokens - 1 &&
    constraints === undefined
  ) {
    token = settings.forcedEosTokenId;
  } else {
    const suppressed = suppression(settings, generated, eosId);
    const base = scores.kind === 'topk' ? index * scores.k : scores.offset + index * scores.stride;
    if (scores.kind !== 'logits') {
      // The decoder's top-k, best first: the best not suppressed (the step asks for one more per suppressed token).
      const k = scores.kind === 'topk' ? scores.k : 2;
      let pick = 0;
      while (pick < k - 1 && suppressed(Number(scores.ids[base + pick]!))) pick++;
      token = Number.isNaN(scores.values[base + pick]!) ? -1 : Number(scores.ids[base + pick]!);
    } else {
      // The hot loop of a greedy step (vocab × rows per step): plain argmax first; a suppressed winner
      // costs a second scan only in the rare step where it won.
      token = argmax(scores.data, base, scores.vocab);
      if (token >= 0 && suppressed(token)) token = argmaxAllowed(scores.data, base, scores.vocab, suppressed);
    }
    if (token < 0) token = eosId; // NaN logits: end the row rather than emit garbage forever
    if (token === eosId && constraints && !constraints.mayEnd(progress)) token = constraints.nextStart(progress);
  }
  if (constraints && generated > 0) hyp.progress = constraints.advance(progress, token);
  hyp.tokens.push(token);
  if (token === eosId || hyp.tokens.length >= settings.maxNewTokens) {
    state.addFinished(hyp);
    state.done = true;
    done.push(state);
  } else {
    next.push({ source: index, row });
  }
}

/**
 * Offer one beam's candidates under its sequence's constraints (constraints.ts): only the forced token while a term
 * is being written or must start; otherwise every candidate but `</s>` while a term is unmet, the next term's first
 * token taking `</s>`'s score when that is higher. From a beam head's top-k, a token outside it scores as the k-th
 * best (a bound: its own score is no higher), since the head returns no other.
 */
function constrainedCandidates(
  hyp: Hypothesis,
  r: number,
  scores: Exclude<StepScores, { kind: 'top2' }>,
  constraints: Constraints,
  left: number,
  suppressEos: boolean,
  banned: readonly number[],
  eosId: number,
  offer: (score: number, token: number, source: number) => void,
): void {
  const progress = hyp.progress ?? NO_PROGRESS;
  const forced = constraints.forced(progress, left);
  const holdEnd = !constraints.mayEnd(progress);
  const termStart = holdEnd && forced === undefined ? constraints.nextStart(progress) : -1;
  let scoreOf: (token: number) => number;
  let candidates: Iterable<number>;
  if (scores.kind === 'topk') {
    const from = r * scores.k;
    const shift = hyp.logprob - scores.logSumExp[r]!;
    const ids = Array.from(scores.ids.subarray(from, from + scores.k), Number);
    scoreOf = (token) => {
      const at = ids.indexOf(token);
      return scores.values[from + (at < 0 ? scores.k - 1 : at)]! + shift;
    };
    candidates = termStart < 0 || ids.includes(termStart) ? ids : [...ids, termStart];
  } else {
    const base = scores.offset + r * scores.stride;
    const shift = hyp.logprob - logSumExp(scores.data, base, scores.vocab);
    scoreOf = (token) => scores.data[base + token]! + shift;
    candidates = tokenIds(scores.vocab);
  }
  if (forced !== undefined) return offer(scoreOf(forced), forced, r);
  const endScore = holdEnd ? scoreOf(eosId) : -Infinity;
  for (const token of candidates) {
    if (((suppressEos || holdEnd) && token === eosId) || banned.includes(token)) continue;
    offer(token === termStart ? Math.max(scoreOf(token), endScore) : scoreOf(token), token, r);
  }
}

function* tokenIds(vocab: number): Generator<number> {
  for (let v = 0; v < vocab; v++) yield v;
}

/** Whether a greedy row may not write a token now: `</s>` before `minNewTokens`, a bad word always. */
function suppression(settings: SearchSettings, generated: number, eosId: number): (token: number) => boolean {
  const suppressEos = generated < settings.minNewTokens;
  const banned = settings.suppressTokenIds ?? [];
  return (token) => (suppressEos && token === eosId) || banned.includes(token);
}

interface Candidate {
  score: number;
  token: number;
  source: number;
}

function beam(
  rows: readonly Row[],
  start: number,
  end: number,
  scores: Exclude<StepScores, { kind: 'top2' }>,
  eosId: number,
  next: StepDecision['next'],
  done: SearchState[],
): void {
  const state = rows[start]!.state;
  const { settings } = state;
  const generated = rows[start]!.hyp.tokens.length; // equal for all live beams of a sequence
  const successors: { source: number; hyp: Hypothesis }[] = [];
  if (generated === 0 && settings.forcedTokenId !== NO_FORCED_TOKEN) {
    // The forced token has probability 1, so one hypothesis continues (HF keeps numBeams copies, all
    // but one at −1e9, which is the same search at numBeams times the cost).
    const hyp = rows[start]!.hyp;
    successors.push({
      source: start,
      hyp: { tokens: [settings.forcedTokenId], logprob: hyp.logprob, attention: hyp.attention },
    });
  } else if (
    settings.forcedEosTokenId !== undefined &&
    generated === settings.maxNewTokens - 1 &&
    settings.constraints === undefined
  ) {
    // Every live beam ends with the forced token at log-probability 0, as HF's processor leaves it (every other
    // token −inf): each is a finished hypothesis, ranked with those that ended before.
    for (let r = start; r < end; r++) {
      const parent = rows[r]!.hyp;
      state.addFinished({
        tokens: [...parent.tokens, settings.forcedEosTokenId],
        logprob: parent.logprob,
        attention: parent.attention,
      });
    }
  } else {
    const width = 2 * settings.numBeams;
    const suppressEos = generated < settings.minNewTokens;
    const banned = settings.suppressTokenIds ?? [];
    const constraints = settings.constraints;
    // Top `width` candidates over all live beams, kept sorted (descending) by insertion.
    const top: Candidate[] = [];
    const offer = (score: number, token: number, source: number) => {
      if (top.length === width && !(score > top[width - 1]!.score)) return;
      let at = top.length === width ? width - 1 : top.length;
      while (at > 0 && top[at - 1]!.score < score) {
        top[at] = top[at - 1]!;
        at--;
      }
      top[at] = { score, token, source };
    };
    for (let r = start; r < end; r++) {
      if (constraints !== undefined) {
        constrainedCandidates(
          rows[r]!.hyp,
          r,
          scores,
          constraints,
          settings.maxNewTokens - generated,
          suppressEos,
          banned,
          eosId,
          offer,
        );
        continue;
      }
      if (scores.kind === 'topk') {
        // The row's best candidates in the order the scan below would offer equal scores (lower id first).
        if (scores.k < width + 1) throw new Error(`beam head gave ${scores.k} candidates; ${width + 1} needed`);
        const shift = rows[r]!.hyp.logprob - scores.logSumExp[r]!;
        for (let j = r * scores.k; j < (r + 1) * scores.k; j++) {
          const token = Number(scores.ids[j]!);
          if (!(suppressEos && token === eosId) && !banned.includes(token)) offer(scores.values[j]! + shift, token, r);
        }
        continue;
      }
      const { data: logits, vocab } = scores;
      const base = scores.offset + r * scores.stride;
      const shift = rows[r]!.hyp.logprob - logSumExp(logits, base, vocab);
      // The hot loop of a host-scanned beam step (vocab × beams): `offer` inlined.
      for (let v = 0; v < vocab; v++) {
        if ((suppressEos && v === eosId) || (banned.length > 0 && banned.includes(v))) continue;
        const score = logits[base + v]! + shift;
        if (top.length === width && !(score > top[width - 1]!.score)) continue;
        let at = top.length === width ? width - 1 : top.length;
        while (at > 0 && top[at - 1]!.score < score) {
          top[at] = top[at - 1]!;
          at--;
        }
        top[at] = { score, token: v, source: r };
      }
    }
    for (let rank = 0; rank < top.length && successors.length < settings.numBeams; rank++) {
      const { score, token, source } = top[rank]!;
      const parent = rows[source]!.hyp;
      const tokens = [...parent.tokens, token];
      const hyp: Hypothesis = { tokens, logprob: score, attention: parent.attention };
      if (constraints) hyp.progress = constraints.advance(parent.progress ?? NO_PROGRESS, token);
      if (token !== eosId) successors.push({ source, hyp });
      else if (rank < settings.numBeams) state.addFinished(hyp);
    }
  }

  const length = generated + 1;
  const outOfRoom = length >= settings.maxNewTokens;
  // HF's BeamHypotheses.is_done (and onnxruntime's): stop at once, or when the best live beam cannot beat the worst
  // kept. Checked at the last step too: a sequence done so keeps the hypotheses it has.
  const finishedEnough =
    successors.length > 0 &&
    state.finished.length >= settings.numBeams &&
    (settings.earlyStopping ||
      state.finished[state.finished.length - 1]!.score >=
        successors[0]!.hyp.logprob / length ** settings.lengthPenalty);
  if (!finishedEnough && !outOfRoom && successors.length > 0) {
    for (const { source, hyp } of successors) next.push({ source, row: { state, hyp } });
    return;
  }
  // Out of room and not done, the live beams compete as they are (HF's finalize, and onnxruntime's BeamSearch): scored
  // by their whole sequence, the decoder start token included, as a finished hypothesis is by its tokens and `</s>`.
  if (outOfRoom && !finishedEnough) for (const { hyp } of successors) state.addFinished(hyp, hyp.tokens.length + 1);
  state.done = true;
  done.push(state);
}
