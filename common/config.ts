/**
 * @module common/config — `.env` (and process env) → one validated, frozen, typed config object.
 *
 * `loadConfig(env)` is pure: it reads only its argument, reports every bad variable at once (naming
 * each), and returns a frozen object. dotenv is loaded by the `main.ts` files only (see `readEnv`).
 * Precedence: defaults < .env < process env < CLI flags (flags are applied by the entry point).
 * Every variable, its default and its check are in common/config/variables.ts; `.env.example` documents the same
 * list (a test keeps the two in sync). setup_config.json is read by common/config/setup-config.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseDotenv } from 'dotenv';
import { ConfigError, ENV_DEFAULTS, ENV_SCHEMA, type Address, type EnvName } from './config/variables.js';

export { ConfigError, ENV_DEFAULTS, type Address, type EnvName } from './config/variables.js';
export { readSetupConfig, type SetupConfig } from './config/setup-config.js';

export type BatchPolicy = 'immediate' | 'torchserve';
export type EngineSharing = 'device' | 'language';
export type FrontKind = 'auto' | 'nginx' | 'builtin';
export type ModelDtypeSetting = 'auto' | 'fp32' | 'q8' | 'q8-rows' | 'fp16';
export type GenerationSetting = 'auto' | 'in-graph' | 'step-loop';

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
  /**
   * Worker threads for translation requests' text work (markup, subtitles, detection, segmentation, glossary terms:
   * translation/text-pool.ts); 0: two, up to four on larger hosts.
   */
  textThreads: number;
  /** A translation request's budget for that work (twice: the plan and the answer), ms; past it 504. */
  textTimeoutMs: number;
  /** Defaults for registrations that do not say (the start script passes BATCH_SIZE explicitly). */
  defaultBatchSize: number;
  defaultMaxBatchDelayMs: number;
  defaultResponseTimeoutS: number;
  defaultWorkersPerModel: number;
  /**
   * Worker processes per model placed on a GPU when a registration does not say: a number, or `auto` (wlm/devices.ts
   * `gpuWorkers`: 2 on CUDA, 1 on WebGPU).
   */
  gpuWorkers: 'auto' | number;
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
  /**
   * How engines generate: `in-graph` (the whole generation of a batch in one onnxruntime run, engine/search/graph.ts),
   * `step-loop` (a decoder run per step), `auto`: in-graph on CUDA, the step loop elsewhere.
   */
  generation: GenerationSetting;
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
   * addresses it resolves to (router/upstream/model-servers.ts). Default: `[upstreamUrl]`.
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
  /**
   * Upstream request timeout, for the whole answer (headers and body): the model server's response timeout plus
   * ROUTER_TIMEOUT_SLACK_MS, so that the model server's own 504 comes first.
   */
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
  /**
   * NATIVE_API_OPEN: with keys on, `POST /` still translates without a key, uncounted (the DeepL and LibreTranslate
   * APIs always need one). Off by default: with keys on every translation route needs a key and counts against it.
   */
  nativeApiOpen: boolean;
  /**
   * PUBLIC_URL: the base URL clients reach the public port at (no trailing slash), for the URLs the router hands
   * out (LibreTranslate's `translatedFileUrl`); never taken from a request's headers. Default
   * `http://localhost:<FRONT_ADDRESS port>` (its host instead when it is not a wildcard).
   */
  publicUrl: string;
  /** CACHE_DISCLOSE (or LOG_LEVEL=debug): the public `/status.json` keeps the cache's counters (else removed). */
  cacheDisclose: boolean;
}

export interface FrontConfig {
  port: number;
  host: string;
  kind: FrontKind;
  routerUrl: string;
  maxBodyBytes: number;
  /** How long past the router's own deadline the front still waits for its answer before its 504. */
  timeoutSlackMs: number;
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

const url = (a: Address) => `http://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;

/** Where a client on this host reaches a server bound to `a` (a wildcard bind is reached on loopback). */
export const localUrl = (a: Address): string =>
  url({ ...a, host: a.host === '0.0.0.0' ? '127.0.0.1' : a.host === '::' ? '::1' : a.host });

/** Where a client on this host reaches the front bound to `a`: `localhost` for a wildcard bind. */
const frontUrl = (a: Address): string =>
  a.host === '0.0.0.0' || a.host === '::' ? `http://localhost:${a.port}` : url(a);

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
  const parsed = ENV_SCHEMA.safeParse(input);
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
      textThreads: e.TEXT_THREADS,
      textTimeoutMs: e.TEXT_TIMEOUT_MS,
      defaultBatchSize: e.BATCH_SIZE,
      defaultMaxBatchDelayMs: e.MAX_BATCH_DELAY_MS,
      defaultResponseTimeoutS: e.RESPONSE_TIMEOUT_S,
      defaultWorkersPerModel: e.DEFAULT_WORKERS_PER_MODEL,
      gpuWorkers: e.GPU_WORKERS,
      batchPolicy: e.BATCH_POLICY,
      engineSharing: e.ENGINE_SHARING,
      intraOpThreads: e.INTRA_OP_THREADS,
      modelDtype: e.MODEL_DTYPE,
      generation: e.GENERATION,
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
      upstreamTimeoutMs: responseTimeoutMs + e.ROUTER_TIMEOUT_SLACK_MS,
      statusUrl: localUrl(e.METRICS_ADDRESS),
      logBodies: e.LOG_BODIES,
      apiKeys: e.API_KEYS === '' ? undefined : abs(e.API_KEYS),
      usageStore: /^rediss?:\/\//.test(e.USAGE_STORE)
        ? { kind: 'redis', url: e.USAGE_STORE }
        : { kind: 'file', dir: e.USAGE_STORE === '' ? path.join(abs(e.RUN_DIR), 'usage') : abs(e.USAGE_STORE) },
      usageStoreServer: e.USAGE_STORE_SERVER,
      nativeApiOpen: e.NATIVE_API_OPEN,
      publicUrl: e.PUBLIC_URL === '' ? frontUrl(e.FRONT_ADDRESS) : e.PUBLIC_URL,
      cacheDisclose: e.CACHE_DISCLOSE || e.LOG_LEVEL === 'debug',
    },
    front: {
      host: e.FRONT_ADDRESS.host,
      port: e.FRONT_ADDRESS.port,
      kind: e.FRONT,
      routerUrl: url(e.ROUTER_ADDRESS),
      maxBodyBytes: e.ROUTER_MAX_BODY_BYTES,
      timeoutSlackMs: e.FRONT_TIMEOUT_SLACK_MS,
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

/** `read()`'s value, for an entry point: a ConfigError is printed as `<name>: <message>` and the process exits. */
export function configOrExit<T>(name: string, read: () => T, exitCode = 2): T {
  try {
    return read();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${name}: ${err.message}\n`);
    return process.exit(exitCode);
  }
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
