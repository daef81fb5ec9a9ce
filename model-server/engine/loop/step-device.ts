/**
 * @module engine/step-device — one decoder step with the cohort's state on the device (WebGPU, docs/engine.md "State
 * stays on the device"): the decoder run over device-held caches (the cross-attention cache made at encoding), and a
 * head's top-k of the logits read back; nothing else crosses to the host.
 */
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { BEAM_HEAD_OUTPUTS } from '../beam-head.js';
import type { Cohort, CohortContext } from './cohort.js';
import type { DeviceSessions } from '../session.js';
import { candidates, type DecoderRun, hostBytesOf, tokenFeeds, topkOf } from './decoder-run.js';

/**
 * `runDecoder` on the device-state path: the decoder's caches and the logits stay `gpu-buffer` tensors; the host
 * feeds each row's last token (and a joinable graph's self-attention mask) and reads the beam head's top-k of the
 * logits. What this run made is disposed if it throws.
 */
export async function runOnDevice(ctx: CohortContext, sessions: DeviceSessions, cohort: Cohort): Promise<DecoderRun> {
  const { rows } = cohort;
  const n = rows.length;
  const H = ctx.heads;
  const dh = ctx.headDim;
  // Made at encoding (encode-device.ts) and kept through every re-layout (cohort-layout.ts).
  const held = cohort.onDevice;
  if (held === null || held === undefined) throw new Error('a device-state cohort holds no device tensors');
  const { cross, encoderMask } = held;
  const { feeds, selfMask } = tokenFeeds(ctx, cohort, 1);
  const started = performance.now();
  const made: ort.Tensor[] = [];
  try {
    if (encoderMask !== null) feeds.encoder_attention_mask = encoderMask;
    let hostBytes = 0;
    const presents: string[] = [];
    const empty = new Float32Array(0);
    for (let i = 0; i < ctx.layers; i++) {
      ['key', 'value'].forEach((part, j) => {
        feeds[`past_key_values.${i}.decoder.${part}`] =
          held.self[2 * i + j] ?? new ort.Tensor('float32', empty, [n, H, 0, dh]);
        feeds[`past_key_values.${i}.encoder.${part}`] = cross[2 * i + j]!;
        presents.push(`present.${i}.decoder.${part}`);
      });
    }
    // Every output (session.ts): what this step does not keep on the device is freed at once.
    const all = await sessions.decoder.run(feeds);
    const self = presents.map((name) => {
      const tensor = all[name]!;
      made.push(tensor);
      return tensor;
    });
    const logits = all.logits;
    if (logits === undefined) throw new Error('decoder returned no logits');
    made.push(logits);
    for (const [name, tensor] of Object.entries(all))
      if (name !== 'logits' && !presents.includes(name) && tensor.location === 'gpu-buffer') tensor.dispose();
    hostBytes += hostBytesOf(Object.values(feeds));
    // A head reads the logits on the device: greedy steps k = 2, beam steps their widest k (beam-head.ts DeviceHeads).
    const k = candidates(ctx, rows);
    const headFeeds = { logits, k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]) };
    const headSession = await sessions.deviceHeads.for(k);
    const head = await headSession.run(headFeeds);
    logits.dispose();
    hostBytes += hostBytesOf([headFeeds.k]) + hostBytesOf(Object.values(head));
    return {
      out: head,
      selfMask,
      top2: null,
      topk: topkOf(head, BEAM_HEAD_OUTPUTS, k),
      cross: null,
      ms: performance.now() - started,
      hostBytes,
      device: { cross, self, encoderMask },
    };
  } catch (err) {
    for (const tensor of made) tensor.dispose();
    throw err;
  }
}
