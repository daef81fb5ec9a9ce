/**
 * @module common/config/variables — every configuration variable with its default and its check (`ENV_DEFAULTS`,
 * `ENV_SCHEMA`), and `ConfigError`, which names every bad one. common/config.ts `loadConfig` is the entry.
 */
import { z } from 'zod';

/** `host:port` or `http://host:port` (TorchServe's config.properties form). */
export interface Address {
  host: string;
  port: number;
}

const address = z.string().transform((value, ctx): Address => {
  const match = /^(?:https?:\/\/)?([^:/\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\/?$/.exec(value.trim());
  const port = match ? Number(match[2]) : NaN;
  if (!match || !(port >= 0 && port <= 65535)) {
    ctx.addIssue({ code: 'custom', message: `expected host:port or http://host:port, got "${value}"` });
    return z.NEVER;
  }
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
});

/** Comma-separated addresses; empty is an empty list. */
const addressList = z.string().transform((value, ctx): Address[] => {
  const addresses: Address[] = [];
  for (const item of value.split(',').map((s) => s.trim())) {
    if (item === '') continue;
    const parsed = address.safeParse(item);
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

/** Any non-empty text (a path). */
const nonEmpty = z.string().min(1);

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Every variable: its default (what `.env.example` says, used when the variable is unset or empty) and its check,
 * grouped by the process that reads it (some are read by more than one).
 */
const VARIABLES = {
  // the model server (common/config.ts ModelServerConfig): its ports, then its files
  INFERENCE_ADDRESS: ['http://127.0.0.1:9999', address],
  MANAGEMENT_ADDRESS: ['http://127.0.0.1:8081', address],
  METRICS_ADDRESS: ['http://127.0.0.1:8082', address],
  MODEL_STORE: ['./model_store', nonEmpty],
  MODEL_DIR: ['./models/tiny', nonEmpty],
  GLOSSARY_DIR: ['./glossaries', nonEmpty],
  SETUP_CONFIG: ['./setup_config.json', nonEmpty],
  // admission and request limits
  JOB_QUEUE_SIZE: ['4096', int(1, 1_000_000)],
  QUEUE_BUDGET_MS: ['5000', int(1, 86_400_000)],
  MAX_REQUEST_CHARS: ['100000', int(1, 100_000_000)],
  MAX_REQUEST_SENTENCES: ['1000', int(1, 1_000_000)],
  TEXT_THREADS: ['0', int(0, 64)],
  TEXT_TIMEOUT_MS: ['5000', int(1, 86_400_000)],
  // batches and workers: defaults of registrations that do not say; how workers share engines and threads
  BATCH_SIZE: ['64', int(1, 1024)],
  MAX_BATCH_DELAY_MS: ['100', int(0, 600_000)],
  RESPONSE_TIMEOUT_S: ['120', int(1, 86_400)],
  DEFAULT_WORKERS_PER_MODEL: ['1', int(0, 64)],
  GPU_WORKERS: ['auto', z.union([z.literal('auto'), int(1, 64)])],
  BATCH_POLICY: ['immediate', z.enum(['immediate', 'torchserve'])],
  ENGINE_SHARING: ['device', z.enum(['device', 'language'])],
  INTRA_OP_THREADS: ['0', int(0, 256)],
  // decoding
  MODEL_DTYPE: ['auto', z.enum(['auto', 'fp32', 'q8', 'q8-rows', 'fp16'])],
  GENERATION: ['auto', z.enum(['auto', 'in-graph', 'step-loop'])],
  NUM_BEAMS: ['2', int(1, 16)],
  MAX_NEW_TOKENS: ['200', int(1, 4096)],
  MIN_NEW_TOKENS: ['0', int(0, 4096)],
  // request bytes, translation cache, keys
  MAX_REQUEST_SIZE: ['6553500', int(1024, 1 << 30)],
  CACHE_MAX_BYTES: ['67108864', int(0, 2 ** 40)],
  TOKEN_AUTH: ['false', bool],
  CACHE_DISCLOSE: ['false', bool],
  KEY_FILE: ['./key_file.json', nonEmpty],
  // the router (RouterConfig)
  ROUTER_ADDRESS: ['http://127.0.0.1:8888', address],
  MODEL_SERVERS: ['', addressList],
  ROUTER_INSTANCES: ['0', int(0, 256)],
  ROUTER_UPSTREAM_CONNECTIONS: ['256', int(1, 10_000)],
  ROUTER_MAX_BODY_BYTES: ['1048576', int(1024, 1 << 30)],
  ROUTER_MAX_UPSTREAM_BYTES: ['0', int(0, 2 ** 33)],
  ROUTER_TIMEOUT_SLACK_MS: ['5000', int(100, 3_600_000)],
  LOG_BODIES: ['false', bool],
  API_KEYS: ['', z.string()],
  USAGE_STORE: [
    '',
    z.string().refine((v) => v === '' || !/^[a-z]+:\/\//.test(v) || /^rediss?:\/\//.test(v), {
      error: 'must be a folder, or a redis:// or rediss:// URL',
    }),
  ],
  USAGE_STORE_SERVER: ['false', bool],
  NATIVE_API_OPEN: ['false', bool],
  PUBLIC_URL: [
    '',
    z
      .string()
      .trim()
      .refine((v) => v === '' || /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(v), {
        error: 'must be empty or an http(s) URL without query or fragment, e.g. https://mt.example.com',
      })
      .transform((v) => v.replace(/\/+$/, '')),
  ],
  // the front (FrontConfig)
  FRONT_ADDRESS: ['http://0.0.0.0:7777', address],
  FRONT: ['auto', z.enum(['auto', 'nginx', 'builtin'])],
  FRONT_TIMEOUT_SLACK_MS: ['10000', int(100, 3_600_000)],
  // every process
  LOG_LEVEL: ['info', z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])],
  LOG_DIR: ['./logs', nonEmpty],
  RUN_DIR: ['./run', nonEmpty],
} as const satisfies Record<string, readonly [string, z.ZodType]>;

type Column<I extends 0 | 1> = { readonly [K in keyof typeof VARIABLES]: (typeof VARIABLES)[K][I] };
const column = <I extends 0 | 1>(i: I) =>
  Object.fromEntries(Object.entries(VARIABLES).map(([name, variable]) => [name, variable[i]])) as Column<I>;

/** Every variable with its default; `.env.example` documents the same list. */
export const ENV_DEFAULTS = column(0);

export type EnvName = keyof typeof ENV_DEFAULTS;

/** Every variable's check: what `loadConfig` parses the environment with. */
export const ENV_SCHEMA = z.object(column(1));
