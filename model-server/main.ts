/**
 * @module model-server/main — the model server process (pm2 fork mode): the only file that reads `.env`.
 *
 * Registers again the models of its last good snapshot (`LOG_DIR/config`, wlm/snapshot.ts: every management
 * change is saved there), before its ports listen, so a restart after a crash serves what the crashed process
 * served and no request finds a model missing meanwhile (a restored model answers `/v2/models/{name}/ready` 400
 * until its workers are up). Starts the three ports (inference, management, metrics; port 0 picks a free one),
 * then reports where it listens in a log line and, when forked with IPC (pm2 or a test), as
 * `{type: 'listening', ports}`, then pm2's `'ready'` once the restored models' workers (or their failures) and the text threads are up. SIGTERM/SIGINT drain: stop taking connections and jobs (new requests get 503), flush every
 * queue to the workers, wait for the answers (at most SHUTDOWN_GRACE_MS), stop the workers, exit 0. A bad
 * configuration exits 1 naming the variable.
 *
 *     node dist/model-server/main.js          # after `npm run build`; configuration from .env and the env
 */
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { answerClientErrors } from '../common/client-error.js';
import { HttpDrain } from '../common/http-drain.js';
import { configOrExit, loadConfig, readEnv, readSetupConfig, type Address } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import type { AppEnv } from './http/error-handler.js';
import { createModelServer } from './http/server.js';
import { writeKeyFile } from './http/token-auth.js';

/** Longest a drain may take before what is left is failed; pm2's kill_timeout must be longer. */
const SHUTDOWN_GRACE_MS = 30_000;
/** How long connections idle when a drain starts are left for their client (the router's pool) to close. */
const IDLE_CLOSE_GRACE_MS = 1_000;
/**
 * How long an idle keep-alive connection is kept (advertised as `Keep-Alive: timeout=75`; undici's pools close
 * theirs 2 s before). Node's 5 s default made the router's lanes reconnect after every pause: under overload a
 * lane the model server refused stays closed for its Retry-After, and reopening it cost one connect per request
 * (~0.6 s of router CPU per overload run in figure 7's profile), on the path of the next refusal.
 */
const KEEP_ALIVE_TIMEOUT_MS = 75_000;

export interface ListeningMessage {
  type: 'listening';
  ports: { inference: number; management: number; metrics: number };
}

async function main(): Promise<void> {
  const root = process.cwd();
  const config = configOrExit('model-server', () => loadConfig(readEnv(root), root), 1);
  const ms = config.modelServer;
  const log = createLogger('model-server', config.logLevel);
  const setupConfig = existsSync(ms.setupConfigPath) ? readSetupConfig(ms.setupConfigPath) : undefined;
  if (!setupConfig) log.warn({ file: ms.setupConfigPath }, 'no setup_config.json: every model runs on the CPU');
  const keys = ms.tokenAuth ? writeKeyFile(ms.keyFile) : undefined;
  if (keys) log.info({ keyFile: ms.keyFile }, 'token authorization on: keys written to the key file');

  const server = createModelServer({
    config: ms,
    setupConfig,
    log,
    workerLogLevel: config.logLevel,
    tokens: keys,
    snapshotDir: path.join(config.logDir, 'config'),
  });
  // The text threads load while the models are restored; pm2's `ready` waits for both.
  const textReady = server.textPool
    .warm()
    .catch((err: Error) => log.error({ err: err.message }, 'text pool not started'));
  const restored = await server.manager.restore();
  const listening = await Promise.all([
    listen(server.inferenceApp, ms.inference),
    listen(server.managementApp, ms.management),
    listen(server.metricsApp, ms.metrics),
  ]);
  const [inference, management, metrics] = listening.map((l) => (l.server.address() as AddressInfo).port);
  const ports = { inference, management, metrics };
  log.info({ ports, hosts: [ms.inference.host, ms.management.host, ms.metrics.host] }, 'model server listening');
  process.send?.({ type: 'listening', ports } satisfies ListeningMessage);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, graceMs: SHUTDOWN_GRACE_MS }, 'draining');
    // New jobs are refused (503) from here; queued ones go to the workers at once. The HTTP drains finish
    // the replies in flight and let keep-alive clients close their connections (see common/http-drain).
    const [, ...clean] = await Promise.all([
      server.manager.close(SHUTDOWN_GRACE_MS),
      ...listening.map(({ drain }) =>
        drain.drain({ graceMs: IDLE_CLOSE_GRACE_MS, timeoutMs: SHUTDOWN_GRACE_MS + IDLE_CLOSE_GRACE_MS }),
      ),
    ]);
    log.info({ clean: clean.every(Boolean) }, 'stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // pm2 (and tests) may ask over IPC instead of a signal.
  process.on('message', (message: { type?: string }) => {
    if (message?.type === 'shutdown') void stop('shutdown message');
  });
  await Promise.all([restored.ready, textReady]);
  if (restored.models.length > 0) log.info({ models: restored.models }, 'restored models ready');
  // pm2's `wait_ready: true` waits for this exact message before it calls the start done.
  if (!stopping) process.send?.('ready');
}

function listen(app: Hono<AppEnv>, address: Address): Promise<{ server: Server; drain: HttpDrain }> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: address.port, hostname: address.host }) as Server;
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
    const drain = new HttpDrain(server);
    answerClientErrors(server);
    server.once('listening', () => resolve({ server, drain }));
    server.once('error', reject);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`model-server: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
