/**
 * @module model-server/http/kserve-api — the Open Inference Protocol (KServe v2, as Triton speaks it) on the
 * inference port, beside TorchServe's API, so KServe, Triton clients and their tooling can call mt-serve:
 *
 *   GET  /v2                                   server metadata {name, version, extensions}
 *   GET  /v2/health/live · /v2/health/ready    200 {"live": true} · {"ready": true}; not ready: 400 {"error"}
 *   GET  /v2/models/{lang}[/versions/{v}]      model metadata: versions, platform, BYTES inputs and outputs
 *   GET  /v2/models/{lang}[/versions/{v}]/ready
 *   POST /v2/models/{lang}[/versions/{v}]/infer   texts in, translations out (tensors: open-inference.ts)
 *
 * Inference takes the same job path as `/predictions` (prediction.ts `runPrediction`): the same plan, queue
 * admission, cancellation when the client goes away, and metrics. Errors are answered `{"error": "..."}` with the
 * status the catalogue gives (400 bad tensors, 404 unknown model, 503 + Retry-After overloaded, 504 timed out).
 *
 * Health follows the protocol (kserve docs/predict-api/v2/required_api.md): 200 means true, a 4xx false — 400, as
 * Triton answers. The success bodies are the ones kserve/open-inference-protocol's inference_rest.md defines, which
 * KServe's Python client reads.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { ServeError, toServeError } from '../../common/errors.js';
import { methodNotAllowed, type AppEnv } from './error-handler.js';
import type { Prediction, PredictionRequest } from './prediction.js';
import type { ModelManager } from '../wlm/model-manager.js';
import {
  decodeInferRequest,
  DETECTED_OUTPUT,
  encodeInferResponse,
  HEADER_LENGTH_HEADER,
  SRC_LANG_INPUT,
  TEXT_INPUT,
  TRANSLATED_OUTPUT,
  type DecodedInferRequest,
} from './open-inference.js';
import type { ModelEntry } from '../wlm/registry.js';

/** Paths answered without a token: Kubernetes probes carry none (as TorchServe leaves `/ping` open). */
export const OPEN_INFERENCE_PUBLIC_PATHS: readonly string[] = ['/v2/health/live', '/v2/health/ready'];

/** What the server metadata names; `binary_tensor_data` is Triton's extension, which its clients send by default. */
export const SERVER_NAME = 'mt-serve';
export const EXTENSIONS: readonly string[] = ['binary_tensor_data'];

export interface OpenInferenceDeps {
  manager: ModelManager;
  /** The shared job path (prediction.ts `runPrediction`). */
  predict: (request: PredictionRequest) => Promise<Prediction>;
}

/**
 * Answer every error under `/v2` in the protocol's shape `{"error": "..."}`. The status and headers (Retry-After,
 * x-request-id) stay what error-handler.ts chose; only the body changes. Install before the shared middleware.
 */
export function openInferenceErrors(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    await next();
    if (c.error === undefined) return;
    const { status, headers } = c.res;
    const kept = new Headers(headers);
    kept.delete('content-length');
    kept.set('content-type', 'application/json');
    c.res = undefined;
    c.res = new Response(JSON.stringify({ error: toServeError(c.error).message }), { status, headers: kept });
  };
}

/** Add the `/v2` routes to the inference app (after its shared middleware). */
export function installOpenInference(app: Hono<AppEnv>, deps: OpenInferenceDeps): void {
  const { manager } = deps;
  const version = packageVersion();
  const serverMetadata = (c: Context<AppEnv>) => c.json({ name: SERVER_NAME, version, extensions: EXTENSIONS });
  app.get('/v2', serverMetadata);
  app.get('/v2/', serverMetadata);
  app.get('/v2/health/live', (c) => c.json({ live: true }));
  app.get('/v2/health/ready', (c) => {
    const reason = serverNotReady(manager);
    // The protocol's "false" is a 4xx; 400 is Triton's.
    return reason === undefined ? c.json({ ready: true }) : c.json({ error: `Server is not ready: ${reason}` }, 400);
  });

  const entryOf = (c: Context<AppEnv>) => manager.registry.get(c.req.param('model')!, c.req.param('version'));
  const modelMetadata = (c: Context<AppEnv>) => c.json(metadataOf(entryOf(c), manager));
  const modelReady = (c: Context<AppEnv>) => {
    const entry = entryOf(c);
    const reason = modelNotReady(entry, manager);
    if (reason === undefined) return c.json({ name: entry.name, ready: true });
    return c.json({ error: `Model ${entry.name} version ${entry.version} is not ready: ${reason}` }, 400);
  };
  const infer = (c: Context<AppEnv>) => inferRoute(c, deps);
  for (const prefix of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    app.get(prefix, modelMetadata);
    app.get(`${prefix}/ready`, modelReady);
    app.post(`${prefix}/infer`, infer);
    app.all(prefix, methodNotAllowed);
    app.all(`${prefix}/ready`, methodNotAllowed);
    app.all(`${prefix}/infer`, methodNotAllowed);
  }
  for (const path of ['/v2', '/v2/', '/v2/health/live', '/v2/health/ready']) app.all(path, methodNotAllowed);
  // Thrown rather than left to notFound, so the error middleware answers it in the protocol's shape.
  app.all('/v2/*', () => {
    throw new ServeError('RESOURCE_NOT_FOUND');
  });
}

async function inferRoute(c: Context<AppEnv>, deps: OpenInferenceDeps): Promise<Response> {
  let request: DecodedInferRequest | undefined;
  const { value, headers } = await deps.predict({
    model: c.req.param('model')!,
    version: c.req.param('version'),
    body: async () => {
      request = decodeInferRequest(new Uint8Array(await c.req.arrayBuffer()), c.req.header(HEADER_LENGTH_HEADER));
      return {
        src_lang: request.srcLang,
        src_text: request.texts,
        ...(request.split === undefined ? {} : { split: request.split }),
      };
    },
    signal: c.req.raw.signal,
    cacheControl: c.req.header('cache-control'),
  });
  // The body callback ran (nothing is answered without it), and an array of texts is answered as arrays.
  const answer = value as { translated: unknown[]; detected_src_lang?: unknown[] };
  const encoded = encodeInferResponse(request!, {
    modelName: headers['x-model-name']!,
    modelVersion: headers['x-model-version']!,
    translated: answer.translated.map(asText),
    detected: answer.detected_src_lang?.map(asText),
  });
  return c.body(encoded.body, 200, { ...headers, ...encoded.headers });
}

/** An echo model answers what it was given, which need not be text; BYTES elements are. */
function asText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The protocol's model metadata for one registered version. */
function metadataOf(entry: ModelEntry, manager: ModelManager): Record<string, unknown> {
  const texts = [-1];
  return {
    name: entry.name,
    versions: manager.registry.versions(entry.name).map((e) => e.version),
    // The spec's name for a model run by ONNX Runtime: the translation engine runs the M2M100 ONNX export.
    platform: entry.handler === 'translation' ? 'onnx_onnxv1' : `mt-serve_${entry.handler}`,
    inputs: [
      { name: TEXT_INPUT, datatype: 'BYTES', shape: texts },
      { name: SRC_LANG_INPUT, datatype: 'BYTES', shape: [1] },
    ],
    outputs: [
      { name: TRANSLATED_OUTPUT, datatype: 'BYTES', shape: texts },
      { name: DETECTED_OUTPUT, datatype: 'BYTES', shape: texts },
    ],
  };
}

/** Why the model cannot take inference now, or undefined when it can: loaded means a worker is ready. */
function modelNotReady(entry: ModelEntry, manager: ModelManager): string | undefined {
  if (manager.closing) return 'the server is shutting down';
  if (entry.pool.target === 0) return 'it has no workers (scaled to 0)';
  if (entry.pool.readyCount === 0) return 'no worker has loaded it yet';
  return undefined;
}

/** Ready when it serves models and every one of them is ready (a probe on a server with no model must fail). */
function serverNotReady(manager: ModelManager): string | undefined {
  if (manager.closing) return 'it is shutting down';
  const entries = manager.registry.entries();
  if (entries.length === 0) return 'no model is registered';
  const waiting = entries.filter((e) => modelNotReady(e, manager) !== undefined);
  // Counted, not named: this path is public (no token), and which languages a server holds is not.
  if (waiting.length > 0) return `${waiting.length} of ${entries.length} models are not ready`;
  return undefined;
}

/** mt-serve's version from its package.json, the nearest one up from this file (two levels from source, three from
 * dist/; the image ships it). */
function packageVersion(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) return String((JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version);
    if (path.dirname(dir) === dir) throw new Error('package.json not found above the model server');
  }
}
