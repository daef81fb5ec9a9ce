/**
 * @module model-server/frontend/openapi — the OpenAPI 3 documents `OPTIONS /` answers on each port (as TorchServe
 * does). Hand-written and small: paths, parameters and status codes, enough for a client or a human to find
 * their way.
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
const path = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const query = (name: string, description: string, type = 'string') => ({
  name,
  in: 'query',
  required: false,
  description,
  schema: { type },
});

function doc(title: string, paths: object): object {
  return {
    openapi: '3.0.1',
    info: { title, version: '1.0', description: 'mt-serve model server (TorchServe-compatible).' },
    paths,
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
    200: ok('The handler output, e.g. {"translated": "..."}', { type: 'object' }),
    400: error('Bad input'),
    404: error('Model or version not found'),
    413: error('Body over max_request_size'),
    500: error('Worker died'),
    503: error('Queue full (Retry-After), no worker, or prediction failed'),
    504: error('Response timeout passed'),
  },
};

export const INFERENCE_OPENAPI = doc('Inference API', {
  '/': { options: { operationId: 'apiDescription', responses: { 200: ok('This document', { type: 'object' }) } } },
  '/ping': {
    get: {
      operationId: 'ping',
      responses: { 200: ok('{"status": "Healthy"}'), 500: ok('{"status": "Unhealthy"}') },
    },
  },
  '/predictions/{model_name}': { post: { ...predict, parameters: [path('model_name', 'Model (target language)')] } },
  '/predictions/{model_name}/{model_version}': {
    post: {
      ...predict,
      operationId: 'versionPredictions',
      parameters: [path('model_name', 'Model (target language)'), path('model_version', 'Model version')],
    },
  },
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
  '/': { options: { operationId: 'apiDescription', responses: { 200: ok('This document', { type: 'object' }) } } },
  '/models': {
    get: {
      operationId: 'listModels',
      parameters: [query('limit', 'Page size (1–100)', 'integer'), query('next_page_token', 'Offset', 'integer')],
      responses: { 200: ok('{"models": [...], "nextPageToken"?: "N"}', { type: 'object' }) },
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
  '/': { options: { operationId: 'apiDescription', responses: { 200: ok('This document', { type: 'object' }) } } },
  '/metrics': {
    get: {
      operationId: 'metrics',
      parameters: [query('name[]', 'Only these metric families')],
      responses: { 200: { description: 'Prometheus text', content: { 'text/plain': { schema: { type: 'string' } } } } },
    },
  },
});
