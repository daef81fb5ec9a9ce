/**
 * @module common/config — `.env` (and process env) → one validated, frozen, typed config object.
 *
 * `loadConfig(env)` is pure: it reads only its argument, reports every bad variable at once (naming
 * each), and returns a frozen object. dotenv is loaded by the `main.ts` files only (see `readEnv`).
 * Precedence: defaults < .env < process env < CLI flags (flags are applied by the entry point).
 * Every variable is documented in `.env.example`; a test keeps the two in sync.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { z } from 'zod';

/** `host:port` or `http://host:port` (TorchServe's config.properties form). */
export interface Address {
  host: string;
  port: number;
}

export type BatchPolicy = 'immediate' | 'torchserve';
export type EngineSharing = 'device' | 'language';
export type FrontKind = 'auto' | 'nginx' | 'builtin';
export type ModelDtypeSetting = 'auto' | 'fp32' | 'q8' | 'q8-rows' | 'fp16';

export interface ModelServerConfig {
  inference: Address;
  management: Address;
  metrics: Address;
  /** Folder of store entries (`{store}/{name}/MAR-INF/MANIFEST.json`). */
  modelStore: string;
  /** Shared model folder (the HF ONNX export layout) every language entry refers to. */
  modelDir: string;
  /** Where glossaries are kept, one JSON file each (glossary-store.ts); `npm start` leaves it alone. */
  glossaryDir: string;
  /** The seed's `{"cuda_id": {...}}` file: languages served and the GPU each is pinned to. */
  setupConfigPath: string;
  jobQueueSize: number;
  /**
   * Longest queue wait a request may expect and still be admitted, ms (wlm/batcher.ts: admission); the
   * effective budget of a model is at most half its response timeout.
   */
  queueBudgetMs: number;
  /** Translation requests: most characters and sentences of text in one request (413 past them). */
  maxRequestChars: number;
  maxRequestSentences: number;
  /** Defaults for registrations that do not say (the start script passes BATCH_SIZE explicitly). */
  defaultBatchSize: number;
  defaultMaxBatchDelayMs: number;
  defaultResponseTimeoutS: number;
  defaultWorkersPerModel: number;
  batchPolicy: BatchPolicy;
  /** `device`: one engine per (model dir, device) shared by its languages; `language`: TorchServe's one per model. */
  engineSharing: EngineSharing;
  /** onnxruntime intra-op threads per worker; 0 lets onnxruntime choose (all cores). */
  intraOpThreads: number;
  /**
   * Weights the engines load: `auto` (int8 on the CPU, fp16 on CUDA when the model folder has those files, else
   * fp32), or `fp32`, `q8`, `q8-rows`, `fp16` (refused at registration when its files are missing).
   */
  modelDtype: ModelDtypeSetting;
  numBeams: number;
  maxNewTokens: number;
  /** `</s>` suppressed until this many tokens (0: off): a fixed output length for benchmarks. */
  minNewTokens: number;
  maxRequestBytes: number;
  /**
   * Bound of the translation cache (translation/translation-cache.ts) in bytes, shared by every model of this server;
   * 0 turns it off.
   */
  cacheMaxBytes: number;
  /**
   * CACHE_DISCLOSE (or LOG_LEVEL=debug): answers carry `x-cache` (hit/miss/partial). Off by default: it tells
   * anyone whether a sentence was translated before, by anyone. The metrics port always shows the counters.
   */
  cacheDisclose: boolean;
  /** Token authorization on the inference and management APIs (TorchServe's key-file scheme). */
  tokenAuth: boolean;
  keyFile: string;
}

export interface RouterConfig {
  address: Address;
  /** pm2 cluster instances; 0 means one per core. */
  instances: number;
  /** Model server inference base URL, e.g. `http://127.0.0.1:9999` (INFERENCE_ADDRESS). */
  upstreamUrl: string;
  /**
   * MODEL_SERVERS: inference base URLs of every model server the router serves from; a name stands for all the
   * addresses it resolves to (router/model-servers.ts). Default: `[upstreamUrl]`.
   */
  modelServers: string[];
  upstreamConnections: number;
  /** Languages accepted as `tgt_lang` (keys of setup_config.json). */
  setupConfigPath: string;
  maxBodyBytes: number;
  /**
   * ROUTER_MAX_UPSTREAM_BYTES: the largest answer body the router reads from a model server (more → 502). Default
   * (0) 8 × ROUTER_MAX_BODY_BYTES: a translation may take a few times the bytes of its source (Latin text into a
   * script of 3 UTF-8 bytes a character), never more.
   */
  maxUpstreamBytes: number;
  /** Upstream request timeout, for the whole answer (headers and body); the model server's response timeout plus slack. */
  upstreamTimeoutMs: number;
  /** Model server metrics API base URL: where `/status.json` gets the status page's figures. */
  statusUrl: string;
  logBodies: boolean;
  /** API_KEYS: the key file or folder of key files of the DeepL and LibreTranslate APIs; undefined: keys off. */
  apiKeys: string | undefined;
  /**
   * USAGE_STORE: where every router instance counts the keys' requests and characters: a folder on this machine
   * (default RUN_DIR/usage), or a Redis/Valkey URL shared by several machines.
   */
  usageStore: { kind: 'file'; dir: string } | { kind: 'redis'; url: string };
  /** USAGE_STORE_SERVER: pm2 runs redis-server (or valkey-server) for a redis:// USAGE_STORE on this machine. */
  usageStoreServer: boolean;
  /** CACHE_DISCLOSE (or LOG_LEVEL=debug): the public `/status.json` keeps the cache's counters (else removed). */
  cacheDisclose: boolean;
}

export interface FrontConfig {
  port: number;
  host: string;
  kind: FrontKind;
  routerUrl: string;
  maxBodyBytes: number;
}

export interface Config {
  modelServer: ModelServerConfig;
  router: RouterConfig;
  front: FrontConfig;
  logLevel: string;
  /** Project root: relative paths in the config resolve against it. */
  root: string;
  /** Where pm2 and nginx write their logs (`npm start` wipes it). */
  logDir: string;
  /** Runtime state: the rendered nginx config, its pid and temp folders. */
  runDir: string;
}

const addressSchema = z.string().transform((value, ctx): Address => {
  const match = /^(?:https?:\/\/)?([^:/\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\/?$/.exec(value.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || !(port >= 0 && port <= 65535)) {
    ctx.addIssue({ code: 'custom', message: `expected host:port or http://host:port, got "${value}"` });
    return z.NEVER;
  }
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
});

/** Comma-separated addresses; empty is an empty list. */
const addressListSchema = z.string().transform((value, ctx): Address[] => {
  const addresses: Address[] = [];
  for (const item of value.split(',').map((s) => s.trim())) {
    if (item === '') continue;
    const parsed = addressSchema.safeParse(item);
    if (!parsed.success) {
      ctx.addIssue({ code: 'custom', message: `expected comma-separated http://host:port, got "${item}"` });
      return z.NEVER;
    }
    addresses.push(parsed.data);
  }
  return addresses;
});

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'expected an integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const bool = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no']))
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** Every variable with its default; `.env.example` documents the same list. */
export const ENV_DEFAULTS = {
  INFERENCE_ADDRESS: 'http://127.0.0.1:9999',
  MANAGEMENT_ADDRESS: 'http://127.0.0.1:8081',
  METRICS_ADDRESS: 'http://127.0.0.1:8082',
  MODEL_STORE: './model_store',
  MODEL_DIR: './models/tiny',
  GLOSSARY_DIR: './glossaries',
  SETUP_CONFIG: './setup_config.json',
  JOB_QUEUE_SIZE: '4096',
  QUEUE_BUDGET_MS: '5000',
  MAX_REQUEST_CHARS: '100000',
  MAX_REQUEST_SENTENCES: '1000',
  BATCH_SIZE: '64',
  MAX_BATCH_DELAY_MS: '100',
  RESPONSE_TIMEOUT_S: '120',
  DEFAULT_WORKERS_PER_MODEL: '1',
  BATCH_POLICY: 'immediate',
  ENGINE_SHARING: 'device',
  INTRA_OP_THREADS: '0',
  MODEL_DTYPE: 'auto',
  NUM_BEAMS: '2',
  MAX_NEW_TOKENS: '200',
  MIN_NEW_TOKENS: '0',
  MAX_REQUEST_SIZE: '6553500',
  CACHE_MAX_BYTES: '67108864',
  TOKEN_AUTH: 'false',
  CACHE_DISCLOSE: 'false',
  KEY_FILE: './key_file.json',
  ROUTER_ADDRESS: 'http://127.0.0.1:8888',
  MODEL_SERVERS: '',
  ROUTER_INSTANCES: '0',
  ROUTER_UPSTREAM_CONNECTIONS: '256',
  ROUTER_MAX_BODY_BYTES: '1048576',
  ROUTER_MAX_UPSTREAM_BYTES: '0',
  LOG_BODIES: 'false',
  API_KEYS: '',
  USAGE_STORE: '',
  USAGE_STORE_SERVER: 'false',
  FRONT_ADDRESS: 'http://0.0.0.0:7777',
  FRONT: 'auto',
  LOG_LEVEL: 'info',
  LOG_DIR: './logs',
  RUN_DIR: './run',
} as const;

export type EnvName = keyof typeof ENV_DEFAULTS;

const envSchema = z.object({
  INFERENCE_ADDRESS: addressSchema,
  MANAGEMENT_ADDRESS: addressSchema,
  METRICS_ADDRESS: addressSchema,
  MODEL_STORE: z.string().min(1),
  MODEL_DIR: z.string().min(1),
  GLOSSARY_DIR: z.string().min(1),
  SETUP_CONFIG: z.string().min(1),
  JOB_QUEUE_SIZE: int(1, 1_000_000),
  QUEUE_BUDGET_MS: int(1, 86_400_000),
  MAX_REQUEST_CHARS: int(1, 100_000_000),
  MAX_REQUEST_SENTENCES: int(1, 1_000_000),
  BATCH_SIZE: int(1, 1024),
  MAX_BATCH_DELAY_MS: int(0, 600_000),
  RESPONSE_TIMEOUT_S: int(1, 86_400),
  DEFAULT_WORKERS_PER_MODEL: int(0, 64),
  BATCH_POLICY: z.enum(['immediate', 'torchserve']),
  ENGINE_SHARING: z.enum(['device', 'language']),
  INTRA_OP_THREADS: int(0, 256),
  MODEL_DTYPE: z.enum(['auto', 'fp32', 'q8', 'q8-rows', 'fp16']),
  NUM_BEAMS: int(1, 16),
  MAX_NEW_TOKENS: int(1, 4096),
  MIN_NEW_TOKENS: int(0, 4096),
  MAX_REQUEST_SIZE: int(1024, 1 << 30),
  CACHE_MAX_BYTES: int(0, 2 ** 40),
  TOKEN_AUTH: bool,
  CACHE_DISCLOSE: bool,
  KEY_FILE: z.string().min(1),
  ROUTER_ADDRESS: addressSchema,
  MODEL_SERVERS: addressListSchema,
  ROUTER_INSTANCES: int(0, 256),
  ROUTER_UPSTREAM_CONNECTIONS: int(1, 10_000),
  ROUTER_MAX_BODY_BYTES: int(1024, 1 << 30),
  ROUTER_MAX_UPSTREAM_BYTES: int(0, 2 ** 33),
  LOG_BODIES: bool,
  API_KEYS: z.string(),
  USAGE_STORE: z.string().refine((v) => v === '' || !/^[a-z]+:\/\//.test(v) || /^rediss?:\/\//.test(v), {
    error: 'must be a folder, or a redis:// or rediss:// URL',
  }),
  USAGE_STORE_SERVER: bool,
  FRONT_ADDRESS: addressSchema,
  FRONT: z.enum(['auto', 'nginx', 'builtin']),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  LOG_DIR: z.string().min(1),
  RUN_DIR: z.string().min(1),
});

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Where a client on this host reaches a server bound to `a` (a wildcard bind is reached on loopback). */
const loopbackIfAny = (a: Address): Address =>
  a.host === '0.0.0.0' ? { ...a, host: '127.0.0.1' } : a.host === '::' ? { ...a, host: '::1' } : a;

const url = (a: Address) => `http://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;

/**
 * Validate `env` (variables not set take their defaults) into a frozen Config.
 * @throws ConfigError naming every bad variable.
 */
export function loadConfig(env: Record<string, string | undefined>, root = process.cwd()): Readonly<Config> {
  const input: Record<string, string> = {};
  for (const name of Object.keys(ENV_DEFAULTS) as EnvName[]) {
    const value = env[name];
    input[name] = value === undefined || value === '' ? ENV_DEFAULTS[name] : value;
  }
  const parsed = envSchema.safeParse(input);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => {
        const name = String(issue.path[0]);
        return `${name}=${JSON.stringify(input[name])}: ${issue.message}`;
      }),
    );
  }
  const e = parsed.data;
  const abs = (p: string) => path.resolve(root, p);
  const responseTimeoutMs = e.RESPONSE_TIMEOUT_S * 1000;
  const config: Config = {
    root,
    logLevel: e.LOG_LEVEL,
    logDir: abs(e.LOG_DIR),
    runDir: abs(e.RUN_DIR),
    modelServer: {
      inference: e.INFERENCE_ADDRESS,
      management: e.MANAGEMENT_ADDRESS,
      metrics: e.METRICS_ADDRESS,
      modelStore: abs(e.MODEL_STORE),
      modelDir: abs(e.MODEL_DIR),
      glossaryDir: abs(e.GLOSSARY_DIR),
      setupConfigPath: abs(e.SETUP_CONFIG),
      jobQueueSize: e.JOB_QUEUE_SIZE,
      queueBudgetMs: e.QUEUE_BUDGET_MS,
      maxRequestChars: e.MAX_REQUEST_CHARS,
      maxRequestSentences: e.MAX_REQUEST_SENTENCES,
      defaultBatchSize: e.BATCH_SIZE,
      defaultMaxBatchDelayMs: e.MAX_BATCH_DELAY_MS,
      defaultResponseTimeoutS: e.RESPONSE_TIMEOUT_S,
      defaultWorkersPerModel: e.DEFAULT_WORKERS_PER_MODEL,
      batchPolicy: e.BATCH_POLICY,
      engineSharing: e.ENGINE_SHARING,
      intraOpThreads: e.INTRA_OP_THREADS,
      modelDtype: e.MODEL_DTYPE,
      numBeams: e.NUM_BEAMS,
      maxNewTokens: e.MAX_NEW_TOKENS,
      minNewTokens: e.MIN_NEW_TOKENS,
      maxRequestBytes: e.MAX_REQUEST_SIZE,
      cacheMaxBytes: e.CACHE_MAX_BYTES,
      cacheDisclose: e.CACHE_DISCLOSE || e.LOG_LEVEL === 'debug',
      tokenAuth: e.TOKEN_AUTH,
      keyFile: abs(e.KEY_FILE),
    },
    router: {
      address: e.ROUTER_ADDRESS,
      instances: e.ROUTER_INSTANCES,
      upstreamUrl: url(e.INFERENCE_ADDRESS),
      modelServers: e.MODEL_SERVERS.length > 0 ? e.MODEL_SERVERS.map(url) : [url(e.INFERENCE_ADDRESS)],
      upstreamConnections: e.ROUTER_UPSTREAM_CONNECTIONS,
      setupConfigPath: abs(e.SETUP_CONFIG),
      maxBodyBytes: e.ROUTER_MAX_BODY_BYTES,
      maxUpstreamBytes: e.ROUTER_MAX_UPSTREAM_BYTES || 8 * e.ROUTER_MAX_BODY_BYTES,
      upstreamTimeoutMs: responseTimeoutMs + 5_000,
      statusUrl: url(loopbackIfAny(e.METRICS_ADDRESS)),
      logBodies: e.LOG_BODIES,
      apiKeys: e.API_KEYS === '' ? undefined : abs(e.API_KEYS),
      usageStore: /^rediss?:\/\//.test(e.USAGE_STORE)
        ? { kind: 'redis', url: e.USAGE_STORE }
        : { kind: 'file', dir: e.USAGE_STORE === '' ? path.join(abs(e.RUN_DIR), 'usage') : abs(e.USAGE_STORE) },
      usageStoreServer: e.USAGE_STORE_SERVER,
      cacheDisclose: e.CACHE_DISCLOSE || e.LOG_LEVEL === 'debug',
    },
    front: {
      host: e.FRONT_ADDRESS.host,
      port: e.FRONT_ADDRESS.port,
      kind: e.FRONT,
      routerUrl: url(e.ROUTER_ADDRESS),
      maxBodyBytes: e.ROUTER_MAX_BODY_BYTES,
    },
  };
  return deepFreeze(config);
}

/**
 * The environment an entry point sees: `.env` in `root` (if present) overlaid by the process env.
 * Only `main.ts` files and scripts call this.
 */
export function readEnv(root: string, processEnv: NodeJS.ProcessEnv = process.env): Record<string, string | undefined> {
  const file = path.join(root, '.env');
  const fromFile = existsSync(file) ? parseDotenv(readFileSync(file)) : {};
  return { ...fromFile, ...processEnv };
}

/** The seed's setup_config.json: language → device id string ("0", "1", …). */
export interface SetupConfig {
  cuda_id: Record<string, string>;
}

/** Read and validate setup_config.json; errors name the file and the bad entry. */
export function readSetupConfig(file: string): SetupConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError([`SETUP_CONFIG=${file}: cannot read JSON (${(err as Error).message})`]);
  }
  const schema = z.object({
    cuda_id: z.record(
      z.string().regex(/^[a-z]{2,3}$/, 'language codes are 2–3 lowercase letters'),
      z.string().regex(/^\d+$/, 'device ids are digit strings'),
    ),
  });
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `SETUP_CONFIG=${file}: ${i.path.join('.')}: ${i.message}`));
  }
  if (Object.keys(parsed.data.cuda_id).length === 0) {
    throw new ConfigError([`SETUP_CONFIG=${file}: cuda_id lists no language`]);
  }
  return parsed.data;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
