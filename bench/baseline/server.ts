/**
 * @module bench/baseline/server — what a Node user would write instead of mt-serve: a plain Hono server that
 * calls the transformers.js translation pipeline once per request, on the same model folder.
 *
 * Contract: `POST /` `{"src_lang","src_text","tgt_lang"}` → `200 {"translated": "…"}` (the front's contract),
 * `GET /ping` → 200 once the model is loaded. Every request generates exactly BASELINE_NEW_TOKENS tokens
 * (min_new_tokens = max_new_tokens), the same fixed work mt-serve is given, and greedy search (transformers.js
 * has no real beam search). The number of tokens generated is read from the pipeline's own `generate` call and
 * returned in the `x-generated-tokens` header, so the bench can check the work was the same.
 *
 * Environment: BASELINE_MODEL_DIR (model folder), BASELINE_PORT, BASELINE_NEW_TOKENS, INTRA_OP_THREADS
 * (0: every core, as in mt-serve: engine-options.ts `intraOpThreadCount`), BASELINE_DTYPE (fp32, default, or q8:
 * transformers.js loads the folder's *_quantized.onnx files).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import path from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { intraOpThreadCount } from '../../model-server/engine/engine-options.js';
import '../../model-server/engine/ort-env.js';
import { env, pipeline } from '@huggingface/transformers';

const modelDir = path.resolve(required('BASELINE_MODEL_DIR'));
const port = Number(required('BASELINE_PORT'));
const newTokens = Number(required('BASELINE_NEW_TOKENS'));
const intraOpThreads = intraOpThreadCount(Number(process.env.INTRA_OP_THREADS ?? '0'));
const dtype = process.env.BASELINE_DTYPE ?? 'fp32';
if (dtype !== 'fp32' && dtype !== 'q8') throw new Error(`BASELINE_DTYPE must be fp32 or q8 (got ${dtype})`);

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

env.allowRemoteModels = false;
env.allowLocalModels = true;
env.localModelPath = path.dirname(modelDir);

const translator = await pipeline('translation', path.basename(modelDir), {
  dtype,
  device: 'cpu',
  session_options: { intraOpNumThreads: intraOpThreads },
});

// Observe (not change) the pipeline's generate call: the bench checks that every system did the same work.
// Requests overlap, so the count travels with each request's async context.
const generatedTokens = new AsyncLocalStorage<{ count: number }>();
const model = translator.model as unknown as { generate: (args: unknown) => Promise<{ dims: number[] }> };
const generate = model.generate.bind(model);
model.generate = async (args: unknown) => {
  const output = await generate(args);
  const store = generatedTokens.getStore();
  if (store) store.count = (output.dims.at(-1) ?? 1) - 1; // minus the decoder start token
  return output;
};

const app = new Hono();
app.get('/ping', (c) => c.json({ status: 'Healthy' }));
app.post('/', async (c) => {
  let body: { src_lang?: unknown; src_text?: unknown; tgt_lang?: unknown };
  try {
    body = await c.req.json();
  } catch {
    return c.json({ code: 400, type: 'BadRequestException', message: 'Request body is not valid JSON.' }, 400);
  }
  const { src_lang, src_text, tgt_lang } = body;
  if (typeof src_lang !== 'string' || typeof tgt_lang !== 'string' || typeof src_text !== 'string' || src_text === '') {
    return c.json(
      { code: 400, type: 'BadRequestException', message: 'src_lang, src_text and tgt_lang are required strings.' },
      400,
    );
  }
  const generated = { count: 0 };
  const output = (await generatedTokens.run(generated, () =>
    translator(src_text, {
      src_lang,
      tgt_lang,
      max_new_tokens: newTokens,
      min_new_tokens: newTokens,
      num_beams: 1,
    } as Record<string, unknown>),
  )) as { translation_text: string }[];
  c.header('x-generated-tokens', String(generated.count));
  return c.json({ translated: output[0]?.translation_text ?? '' });
});

const server = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`baseline listening on ${info.port}\n`);
});
// Node's defaults would cut this server's connections for reasons that are not its speed: a keep-alive socket idle
// for 5 s while the event loop is busy may be closed just as the client reuses it (the last full run lost 15 of
// 64 requests to ECONNRESET at concurrency 64, their work wasted), and no request may take over 300 s in all.
// What a user would set for long-running inference.
Object.assign(server, { keepAliveTimeout: 120_000, headersTimeout: 125_000, requestTimeout: 0 });
