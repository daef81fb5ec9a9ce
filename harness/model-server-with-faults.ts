/**
 * @module harness/model-server-with-faults — a model server process for fault drills: the same wiring as
 * `model-server/main.ts` (config from the environment, three ports, IPC `listening`, SIGTERM drain), plus what
 * production never exposes — workers with faults for named models (fault-worker.ts: `slow:<ms>`, `hang-on-batch`,
 * `crash-on-batch`, `fail-load` …, forked through the `spawn` seam by fault-spawner.ts) and a short restart backoff.
 *
 *     MT_TEST_FAULTS='{"ko":"hang-on-batch"}'   model → fault, JSON
 *     MT_TEST_BACKOFF_MS=50                     one restart backoff unit (production: 1000)
 *
 * Only tests start this file; `model-server/main.ts` has no way to set a fault. Models with different faults need
 * an engine each (ENGINE_SHARING=language).
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { loadConfig, readSetupConfig, type Address } from '../common/config.js';
import { answerClientErrors } from '../common/client-error.js';
import { HttpDrain } from '../common/http-drain.js';
import { createLogger } from '../common/logger.js';
import type { AppEnv } from '../model-server/http/error-handler.js';
import { WEBGPU_NOT_PROBED } from '../model-server/wlm/devices.js';
import { createModelServer } from '../model-server/http/server.js';
import { writeKeyFile } from '../model-server/http/token-auth.js';
import { faultSpawner } from './fault-spawner.js';

const config = loadConfig(process.env, process.cwd());
const ms = config.modelServer;
const log = createLogger('model-server', config.logLevel);
const faults = JSON.parse(process.env.MT_TEST_FAULTS ?? '{}') as Record<string, string>;
const keys = ms.tokenAuth ? writeKeyFile(ms.keyFile) : undefined;

const server = createModelServer({
  config: ms,
  setupConfig: readSetupConfig(ms.setupConfigPath),
  log,
  workerLogLevel: config.logLevel,
  cuda: { gpus: [], unavailableReason: 'fault drill: CPU only' },
  webgpu: WEBGPU_NOT_PROBED,
  timings: { backoffUnitMs: Number(process.env.MT_TEST_BACKOFF_MS ?? 50), stopTimeoutMs: 3_000 },
  spawn: faultSpawner(faults, config.logLevel),
  ...(keys ? { tokens: { inference: keys.inference, management: keys.management } } : {}),
  snapshotDir: path.join(config.logDir, 'config'),
});
await server.manager.restore();

function listen(app: Hono<AppEnv>, address: Address): Promise<{ server: Server; drain: HttpDrain }> {
  return new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: address.port, hostname: address.host }) as Server;
    const drain = new HttpDrain(s);
    answerClientErrors(s);
    s.once('listening', () => resolve({ server: s, drain }));
    s.once('error', reject);
  });
}

const listening = await Promise.all([
  listen(server.inferenceApp, ms.inference),
  listen(server.managementApp, ms.management),
  listen(server.metricsApp, ms.metrics),
]);
const [inference, management, metrics] = listening.map((l) => (l.server.address() as AddressInfo).port);
process.send?.({ type: 'listening', ports: { inference, management, metrics } });

let stopping = false;
process.on('SIGTERM', () => {
  if (stopping) return;
  stopping = true;
  void Promise.all([
    server.manager.close(10_000),
    ...listening.map(({ drain }) => drain.drain({ graceMs: 500, timeoutMs: 11_000 })),
  ]).then(() => process.exit(0));
});
