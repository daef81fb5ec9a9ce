/**
 * @module model-server/http/management-api — the management port (TorchServe's :8081): list, register,
 * describe, scale, unregister, set-default, `OPTIONS /`. Shapes, messages and codes follow TorchServe
 * (shared/TORCHSERVE.md); a bad parameter is a 400 that names it. Built by a factory; it never listens.
 */
import { Hono, type Context } from 'hono';
import { ServeError } from '../../common/errors.js';
import { installCommon, methodNotAllowed, type AppEnv, type CommonOptions } from './error-handler.js';
import type { ManagementResult, ModelManager } from '../wlm/model-manager.js';
import type { RegisterRequest } from '../wlm/registration.js';
import { describeModel } from './model-description.js';
import { MANAGEMENT_OPENAPI } from './openapi.js';

/** The models, and the port's options (`token`: the management key when TOKEN_AUTH is on). */
export interface ManagementApiDeps extends CommonOptions {
  manager: ModelManager;
}

/** TorchServe's page size bounds for `GET /models`. */
const MAX_PAGE = 100;
/** Most workers one model may ask for. */
const MAX_WORKERS = 64;

type Params = Map<string, string>;

export function createManagementApp(deps: ManagementApiDeps): Hono<AppEnv> {
  const { manager } = deps;
  const app = new Hono<AppEnv>();
  installCommon(app, deps);
  const reply = (c: Context<AppEnv>, result: ManagementResult) =>
    c.json({ status: result.message }, result.settled ? 200 : 202);

  app.options('/', (c) => c.json(MANAGEMENT_OPENAPI));

  app.get('/models', (c) => {
    const params = queryParams(c);
    const rawLimit = optionalInt(params, 'limit', -Infinity, Infinity);
    const limit = rawLimit === undefined || rawLimit <= 0 || rawLimit > MAX_PAGE ? MAX_PAGE : rawLimit;
    const offset = Math.max(0, optionalInt(params, 'next_page_token', -Infinity, Infinity) ?? 0);
    const names = manager.registry.names();
    const models = names.slice(offset, offset + limit).map((name) => {
      const entry = manager.registry.get(name);
      return { modelName: name, modelUrl: entry.url };
    });
    const next = offset + limit < names.length ? { nextPageToken: String(offset + limit) } : {};
    return c.json({ models, ...next });
  });

  app.post('/models', async (c) => {
    const params = { ...Object.fromEntries(queryParams(c)), ...(await jsonBodyParams(c)) };
    return reply(c, await manager.register(registerRequest(new Map(Object.entries(params)))));
  });

  app.get('/models/:name/all', async (c) => {
    const entries = manager.registry.versions(c.req.param('name'));
    return c.json(await Promise.all(entries.map((e) => describeModel(manager, e))));
  });
  app.get('/models/:name/:version?', async (c) => {
    const entry = manager.registry.get(c.req.param('name'), c.req.param('version'));
    return c.json([await describeModel(manager, entry)]);
  });

  app.put('/models/:name/:version/set-default', (c) =>
    reply(c, manager.setDefault(c.req.param('name'), c.req.param('version'))),
  );
  app.put('/models/:name/:version?', async (c) => {
    const params = queryParams(c);
    const min = optionalInt(params, 'min_worker', 0, MAX_WORKERS) ?? 1;
    const max = optionalInt(params, 'max_worker', 0, MAX_WORKERS) ?? min;
    if (max < min) throw new ServeError('BAD_REQUEST', 'max_worker cannot be less than min_worker.');
    const synchronous = optionalBool(params, 'synchronous') ?? false;
    return reply(c, await manager.scale(c.req.param('name'), c.req.param('version'), min, max, synchronous));
  });

  app.delete('/models/:name/:version?', async (c) =>
    reply(c, await manager.unregister(c.req.param('name'), c.req.param('version'))),
  );

  app.all('/', methodNotAllowed);
  app.all('/models', methodNotAllowed);
  app.all('/models/:name/:version?', methodNotAllowed);
  app.all('/models/:name/:version/set-default', methodNotAllowed);
  return app;
}

/** Turn TorchServe's snake_case registration parameters into a typed request; every bad one is a named 400. */
export function registerRequest(params: Params): RegisterRequest {
  const url = params.get('url');
  if (url === undefined) throw new ServeError('BAD_REQUEST', 'Parameter url is required.');
  const request: RegisterRequest = { url, synchronous: optionalBool(params, 'synchronous') ?? true };
  const text = (key: string) => {
    const value = params.get(key);
    if (value === undefined) return undefined;
    if (value === '') throw new ServeError('BAD_REQUEST', `Parameter ${key} must not be empty.`);
    return value;
  };
  const assign = <K extends keyof RegisterRequest>(key: K, value: RegisterRequest[K] | undefined) => {
    if (value !== undefined) request[key] = value;
  };
  assign('modelName', text('model_name'));
  assign('handler', text('handler'));
  assign('runtime', text('runtime'));
  assign('batchSize', optionalInt(params, 'batch_size', 1, 1024));
  assign('maxBatchDelayMs', optionalInt(params, 'max_batch_delay', 0, 600_000));
  assign('initialWorkers', optionalInt(params, 'initial_workers', 0, MAX_WORKERS));
  assign('responseTimeoutS', optionalInt(params, 'response_timeout', 1, 86_400));
  assign('startupTimeoutS', optionalInt(params, 'startup_timeout', 1, 86_400));
  return request;
}

function queryParams(c: Context<AppEnv>): Params {
  return new Map(Object.entries(c.req.query()));
}

/** A JSON body's keys, values as strings (TorchServe accepts the query parameters as a JSON body too). */
async function jsonBodyParams(c: Context<AppEnv>): Promise<Record<string, string>> {
  const raw = await c.req.text();
  if (raw.trim() === '') return {};
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new ServeError('INVALID_JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ServeError('BAD_REQUEST', 'Registration body must be a JSON object of parameters.');
  }
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(body)) {
    if (value === null || typeof value === 'object') {
      throw new ServeError('BAD_REQUEST', `Parameter ${key} must be a string, number or boolean.`);
    }
    out[key] = String(value);
  }
  return out;
}

function optionalInt(params: Params, key: string, min: number, max: number): number | undefined {
  const raw = params.get(key);
  if (raw === undefined) return undefined;
  const value = /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = Number.isFinite(min) && Number.isFinite(max) ? ` from ${min} to ${max}` : '';
    throw new ServeError('BAD_REQUEST', `Invalid value for parameter ${key}: "${raw}" (expected an integer${range}).`);
  }
  return value;
}

function optionalBool(params: Params, key: string): boolean | undefined {
  const raw = params.get(key)?.toLowerCase();
  if (raw === undefined) return undefined;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ServeError(
    'BAD_REQUEST',
    `Invalid value for parameter ${key}: "${params.get(key)}" (expected true or false).`,
  );
}
