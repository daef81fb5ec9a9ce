/**
 * @module model-server/http/openapi — the OpenAPI 3 documents `OPTIONS /` answers on each port (as TorchServe
 * does). Hand-written and small: paths, parameters and status codes, enough for a client or a human to find
 * their way. The inference port's document covers TorchServe's routes and the Open Inference Protocol's /v2.
 */

const errorSchema = {
  type: 'object',
  required: ['code', 'type', 'message'],
  properties: { code: { type: 'integer' }, type: { type: 'string' }, message: { type: 'string' } },
};
const statusSchema = { type: 'object', properties: { status: { type: 'string' } } };
const json = (schema: object) => ({ 'application/json': { schema } });
const error = (description: string) => ({ description, content: json(errorSchema) });
const ok = (description: string, schema: object = statusSchema) => ({ description, content: json(schema) });
const anObject = { type: 'object' };
const parameter = (where: 'path' | 'query', name: string, description: string, type = 'string') => ({
  name,
  in: where,
  required: where === 'path',
  description,
  schema: { type },
});
const path = (name: string, description: string) => parameter('path', name, description);
const query = (name: string, description: string, type?: string) => parameter('query', name, description, type);

/** One port's document; every port answers `OPTIONS /` with it. */
function doc(title: string, paths: object): object {
  return {
    openapi: '3.0.1',
    info: { title, version: '1.0', description: 'mt-serve model server (TorchServe-compatible).' },
    paths: {
      '/': { options: { operationId: 'apiDescription', responses: { 200: ok('This document', anObject) } } },
      ...paths,
    },
    components: { schemas: { Error: errorSchema } },
  };
}

const predict = {
  operationId: 'predictions',
  summary: 'Translate (or echo) one input; src_text may be an array, answered in order.',
  requestBody: {
    required: true,
    content: json({
      type: 'object',
      properties: {
        src_lang: { type: 'string' },
        src_text: { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] },
      },
    }),
  },
  responses: {
    200: ok('The handler output, e.g. {"translated": "..."}', anObject),
    400: error('Bad input'),
    404: error('Model or version not found'),
    413: error('Body over max_request_size'),
    500: error('Worker died'),
    503: error('Queue full (Retry-After), no worker, or prediction failed'),
    504: error('Response timeout passed'),
  },
};

/** The Open Inference Protocol's error body (kserve-api.ts answers every /v2 error with it). */
const v2ErrorSchema = { type: 'object', required: ['error'], properties: { error: { type: 'string' } } };
const v2Error = (description: string) => ({ description, content: json(v2ErrorSchema) });
const tensor = (extra: object = {}) => ({
  type: 'object',
  required: ['name', 'datatype', 'shape'],
  properties: {
    name: { type: 'string' },
    datatype: { type: 'string', enum: ['BYTES'] },
    shape: { type: 'array', items: { type: 'integer' } },
    parameters: { type: 'object' },
    ...extra,
  },
});
const modelParams = [path('model_name', 'Model (target language)')];
const versionParams = [...modelParams, path('model_version', 'Model version')];
const v2Metadata = (parameters: object[]) => ({
  get: {
    operationId: parameters.length > 1 ? 'v2ModelVersionMetadata' : 'v2ModelMetadata',
    parameters,
    responses: {
      200: ok(
        '{name, versions, platform, inputs: text BYTES [-1], src_lang BYTES [1]; outputs: translated, detected_src_lang}',
        anObject,
      ),
      404: v2Error('Model or version not found'),
    },
  },
});
const v2Ready = (parameters: object[]) => ({
  get: {
    operationId: parameters.length > 1 ? 'v2ModelVersionReady' : 'v2ModelReady',
    parameters,
    responses: {
      200: ok('{"name", "ready": true}', anObject),
      400: v2Error('Not ready (no worker has loaded it, or scaled to 0)'),
      404: v2Error('Model or version not found'),
    },
  },
});
const v2Infer = (parameters: object[]) => ({
  post: {
    operationId: parameters.length > 1 ? 'v2ModelVersionInfer' : 'v2ModelInfer',
    summary:
      'Translate the BYTES input "text" (any shape) from src_lang (a BYTES [1] input or the src_lang parameter; "auto" detects); ' +
      "Triton's binary tensor data accepted (Inference-Header-Content-Length).",
    parameters,
    requestBody: {
      required: true,
      content: json({
        type: 'object',
        required: ['inputs'],
        properties: {
          id: { type: 'string' },
          parameters: {
            type: 'object',
            properties: {
              src_lang: { type: 'string' },
              split: { type: 'string', enum: ['sentences', 'none'] },
              binary_data_output: { type: 'boolean' },
            },
          },
          inputs: { type: 'array', items: tensor({ data: { type: 'array' } }) },
          outputs: {
            type: 'array',
            items: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
          },
        },
      }),
    },
    responses: {
      200: ok('{model_name, model_version, id?, outputs: translated BYTES and, with auto, detected_src_lang}', {
        type: 'object',
        properties: {
          model_name: { type: 'string' },
          model_version: { type: 'string' },
          id: { type: 'string' },
          outputs: { type: 'array', items: tensor({ data: { type: 'array', items: { type: 'string' } } }) },
        },
      }),
      400: v2Error('Bad tensors or parameters'),
      404: v2Error('Model or version not found'),
      413: v2Error('Over max_request_size or the request limits'),
      503: v2Error('Queue full or overloaded (Retry-After), or no worker'),
      504: v2Error('Response timeout passed'),
    },
  },
});

export const INFERENCE_OPENAPI = doc('Inference API', {
  '/ping': {
    get: {
      operationId: 'ping',
      responses: { 200: ok('{"status": "Healthy"}'), 500: ok('{"status": "Unhealthy"}') },
    },
  },
  '/predictions/{model_name}': { post: { ...predict, parameters: modelParams } },
  '/predictions/{model_name}/{model_version}': {
    post: { ...predict, operationId: 'versionPredictions', parameters: versionParams },
  },
  // The Open Inference Protocol (KServe v2), kserve-api.ts.
  '/v2': {
    get: {
      operationId: 'v2ServerMetadata',
      responses: {
        200: ok('{"name": "mt-serve", "version", "extensions": ["binary_tensor_data"]}', anObject),
      },
    },
  },
  '/v2/health/live': {
    get: { operationId: 'v2ServerLive', responses: { 200: ok('{"live": true}', anObject) } },
  },
  '/v2/health/ready': {
    get: {
      operationId: 'v2ServerReady',
      responses: {
        200: ok('{"ready": true}: every registered model has a ready worker', anObject),
        400: v2Error('Not ready (no model registered, or one not ready)'),
      },
    },
  },
  '/v2/models/{model_name}': v2Metadata(modelParams),
  '/v2/models/{model_name}/versions/{model_version}': v2Metadata(versionParams),
  '/v2/models/{model_name}/ready': v2Ready(modelParams),
  '/v2/models/{model_name}/versions/{model_version}/ready': v2Ready(versionParams),
  '/v2/models/{model_name}/infer': v2Infer(modelParams),
  '/v2/models/{model_name}/versions/{model_version}/infer': v2Infer(versionParams),
});

const registerParams = [
  query('url', 'Store entry name (required), e.g. ko or ko.mar'),
  query('model_name', 'Name to register under (default: the manifest modelName)'),
  query('handler', 'Handler name (default: the manifest handler)'),
  query('runtime', 'Runtime (node)'),
  query('batch_size', 'Max jobs per batch (default BATCH_SIZE)', 'integer'),
  query('max_batch_delay', 'Batch window in ms from the oldest arrival (default MAX_BATCH_DELAY_MS)', 'integer'),
  query('initial_workers', 'Workers to start (default DEFAULT_WORKERS_PER_MODEL)', 'integer'),
  query('synchronous', 'Wait for the workers (default true)', 'boolean'),
  query('response_timeout', 'Seconds before a job is answered 504 (default RESPONSE_TIMEOUT_S)', 'integer'),
  query('startup_timeout', 'Seconds a worker may take to load (default 120)', 'integer'),
];
const scaleParams = [
  query('min_worker', 'Workers wanted (default 1)', 'integer'),
  query('max_worker', 'Upper bound (default min_worker)', 'integer'),
  query('synchronous', 'Wait for the workers (default false)', 'boolean'),
];
const describe = { 200: ok('Array of model descriptions', { type: 'array' }), 404: error('Not found') };

export const MANAGEMENT_OPENAPI = doc('Management API', {
  '/models': {
    get: {
      operationId: 'listModels',
      parameters: [query('limit', 'Page size (1–100)', 'integer'), query('next_page_token', 'Offset', 'integer')],
      responses: { 200: ok('{"models": [...], "nextPageToken"?: "N"}', anObject) },
    },
    post: {
      operationId: 'registerModel',
      parameters: registerParams,
      responses: {
        200: ok('Registered'),
        202: ok('Processing worker updates...'),
        400: error('Bad parameter'),
        404: error('Store entry not found'),
        409: error('Already registered'),
        500: error('Workers failed to start'),
      },
    },
  },
  '/models/{model_name}': {
    get: { operationId: 'describeModel', parameters: [path('model_name', 'Model')], responses: describe },
    put: {
      operationId: 'setAutoScale',
      parameters: [path('model_name', 'Model'), ...scaleParams],
      responses: { 200: ok('Scaled'), 202: ok('Processing'), 400: error('Bad parameter'), 404: error('Not found') },
    },
    delete: {
      operationId: 'unregisterModel',
      parameters: [path('model_name', 'Model')],
      responses: { 200: ok('Unregistered'), 404: error('Not found') },
    },
  },
  '/models/{model_name}/{model_version}': {
    get: {
      operationId: 'describeModelVersion',
      parameters: [path('model_name', 'Model'), path('model_version', 'Version, or "all"')],
      responses: describe,
    },
    put: {
      operationId: 'setAutoScaleVersion',
      parameters: [path('model_name', 'Model'), path('model_version', 'Version'), ...scaleParams],
      responses: { 200: ok('Scaled'), 202: ok('Processing'), 400: error('Bad parameter'), 404: error('Not found') },
    },
    delete: {
      operationId: 'unregisterModelVersion',
      parameters: [path('model_name', 'Model'), path('model_version', 'Version')],
      responses: { 200: ok('Unregistered'), 404: error('Not found') },
    },
  },
  '/models/{model_name}/{model_version}/set-default': {
    put: {
      operationId: 'setDefault',
      parameters: [path('model_name', 'Model'), path('model_version', 'Version')],
      responses: { 200: ok('Default updated'), 404: error('Not found') },
    },
  },
});

export const METRICS_OPENAPI = doc('Metrics API', {
  '/metrics': {
    get: {
      operationId: 'metrics',
      parameters: [query('name[]', 'Only these metric families')],
      responses: { 200: { description: 'Prometheus text', content: { 'text/plain': { schema: { type: 'string' } } } } },
    },
  },
});
