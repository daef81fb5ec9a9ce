/**
 * @module model-server/http/inference-api — the inference port (TorchServe's :9999): `POST /predictions/{model}
 * [/{version}]`, `GET /ping`, `OPTIONS /`, and beside them the Open Inference Protocol's `/v2` (kserve-api.ts), which
 * shares the job path (prediction.ts `runPrediction`). Built by a factory; it never listens (main.ts does).
 *
 * A body `{"src_lang", "src_text": [...]}` becomes one job per string, so an array batches with everyone else's
 * traffic; the answer is `{"translated": [...]}` in order (the first failing item, by position, fails the
 * request). Any other body is one job, answered with the handler's value as is. A client that disconnects before
 * its answer abandons its jobs (job.ts): nothing keeps computing for nobody. Answer headers say who served:
 * `x-model-name`, `x-model-version`, `x-worker-id`, `x-device` and, on a CPU fallback, `x-device-fallback`.
 */
import { Hono, type Context } from 'hono';
import { ServeError } from '../../common/errors.js';
import { decodeUtf8, parseJsonBody, type JsonValue } from '../../common/strict-utf8.js';
import { installCommon, methodNotAllowed, type AppEnv, type CommonOptions } from './error-handler.js';
import { installGlossaries } from './glossary-api.js';
import { installOpenInference, OPEN_INFERENCE_PUBLIC_PATHS, openInferenceErrors } from './kserve-api.js';
import { INFERENCE_OPENAPI } from './openapi.js';
import { runPrediction, type PredictionDeps } from './prediction.js';

/** The job path's needs and the port's (`token`: the inference key when TOKEN_AUTH is on). */
export interface InferenceApiDeps extends PredictionDeps, Omit<CommonOptions, 'publicPaths'> {}

export function createInferenceApp(deps: InferenceApiDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  // Outside the shared middleware, so that its refusals (401, 413) under /v2 also take the protocol's error shape.
  app.use('/v2/*', openInferenceErrors());
  installCommon(app, { ...deps, publicPaths: ['/ping', ...OPEN_INFERENCE_PUBLIC_PATHS] });

  app.get('/ping', (c) => {
    const health = deps.manager.health();
    return health.healthy ? c.json({ status: 'Healthy' }, 200) : c.json({ status: 'Unhealthy' }, 500);
  });
  app.options('/', (c) => c.json(INFERENCE_OPENAPI));
  app.post('/predictions/:model/:version?', (c) => predict(c, deps));

  app.all('/', methodNotAllowed);
  app.all('/ping', methodNotAllowed);
  app.all('/predictions/:model/:version?', methodNotAllowed);
  if (deps.glossaries) installGlossaries(app, deps.glossaries);
  installOpenInference(app, { manager: deps.manager, predict: (request) => runPrediction(deps, request) });
  return app;
}

async function predict(c: Context<AppEnv>, deps: InferenceApiDeps): Promise<Response> {
  const { value, headers } = await runPrediction(deps, {
    model: c.req.param('model')!,
    version: c.req.param('version'),
    body: async () => decodeBody(decodeUtf8(await c.req.arrayBuffer()), c.req.header('content-type')),
    signal: c.req.raw.signal,
    cacheControl: c.req.header('cache-control'),
  });
  return typeof value === 'string' ? c.text(value, 200, headers) : c.json(value as object, 200, headers);
}

/** JSON bodies are decoded for the handler; a non-JSON body reaches it as text (as TorchServe passes raw bytes). */
function decodeBody(raw: string, contentType: string | undefined): JsonValue {
  if (raw.length === 0) throw new ServeError('BAD_REQUEST', 'Request body is empty.');
  if (contentType?.toLowerCase().includes('json')) return parseJsonBody(raw);
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}
