/**
 * @module deploy/docker/model-server-entry — the model server container's entry (PID 1): the model-server half of
 * scripts/start.sh, for Kubernetes, where no script runs after the process starts.
 *
 *   1. archive one store entry per language of SETUP_CONFIG into MODEL_STORE (an emptyDir), all referring to
 *      MODEL_DIR (the models volume);
 *   2. fork the model server (model-server/main) and wait for its `ready` message, which follows `listening` once
 *      the models it restored from its snapshot (LOG_DIR/config: a container restarted in its pod) have workers;
 *   3. register every language through the management API, on loopback, with BATCH_SIZE, MAX_BATCH_DELAY_MS,
 *      DEFAULT_WORKERS_PER_MODEL and `synchronous=true`, which answers once the workers have loaded the model;
 *   4. write `READY_FILE` (`{RUN_DIR}/models-registered`): the pod's startupProbe waits for it.
 *
 * Why the file: the model server's `GET /ping` answers 200 while no model is registered (no model is unhealthy), so
 * it cannot tell "models loaded" from "nothing loaded yet". Once the file exists, readiness and liveness probe
 * `/ping`, which then turns 500 when a model's workers are down.
 *
 * SIGTERM/SIGINT are passed to the model server, which drains (model-server/main.ts); this process exits with its
 * exit code. A registration that fails stops the model server and exits 1, so the pod restarts visibly.
 *
 *     node dist/deploy/docker/model-server-entry.js     # in the image (built by deploy/docker/tsconfig.json)
 *
 * Over IPC (when forked, as in its test) it relays the model server's `{type: 'listening', ports}`.
 */
import { fork } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { configOrExit, loadConfig, localUrl, readEnv, readSetupConfig, type Config } from '../../common/config.js';
import { entriesOf } from '../../common/config/setup-config.js';
import { resolveEntry } from '../../common/entry.js';
import { createLogger, type Logger } from '../../common/logger.js';
import type { ListeningMessage } from '../../model-server/main.js';
import { archiveSetupConfig } from '../../model-server/tools/archiver.js';

/** The file the startupProbe checks, relative to RUN_DIR. */
export const READY_FILE = 'models-registered';

/** The registration request of one language: TorchServe's management parameters, as scripts/start.sh sends them. */
export function registrationUrl(managementUrl: string, language: string, config: Readonly<Config>): string {
  const ms = config.modelServer;
  const query = new URLSearchParams({
    url: language,
    batch_size: String(ms.defaultBatchSize),
    max_batch_delay: String(ms.defaultMaxBatchDelayMs),
    initial_workers: String(ms.defaultWorkersPerModel),
    synchronous: 'true',
  });
  return `${managementUrl}/models?${query}`;
}

async function register(config: Readonly<Config>, languages: string[], managementPort: number, log: Logger) {
  const ms = config.modelServer;
  const managementUrl = localUrl({ host: ms.management.host, port: managementPort });
  const headers: Record<string, string> = {};
  if (ms.tokenAuth) {
    // TOKEN_AUTH: the model server wrote its keys at start (TorchServe's key_file.json layout).
    const keys = JSON.parse(readFileSync(ms.keyFile, 'utf8')) as { management: { key: string } };
    headers.authorization = `Bearer ${keys.management.key}`;
  }
  for (const language of languages) {
    const res = await fetch(registrationUrl(managementUrl, language, config), { method: 'POST', headers });
    const body = await res.text();
    // 409: already registered — restored from the snapshot after a container restart, its workers already up.
    if (res.status !== 200 && res.status !== 409) {
      throw new Error(`registering "${language}" failed with HTTP ${res.status}: ${body}`);
    }
    log.info({ language, status: res.status }, 'language registered');
  }
}

function main(): void {
  const root = process.cwd();
  const [config, setup] = configOrExit('model-server-entry', () => {
    const config = loadConfig(readEnv(root), root);
    return [config, readSetupConfig(config.modelServer.setupConfigPath)] as const;
  });
  // Every store entry: the languages, and the pairs with a model of their own (registered alike).
  const languages = entriesOf(setup);
  const log = createLogger('model-server-entry', config.logLevel);
  const ms = config.modelServer;
  const readyFile = path.join(config.runDir, READY_FILE);
  mkdirSync(config.runDir, { recursive: true });
  rmSync(readyFile, { force: true });

  try {
    const written = archiveSetupConfig(setup, { modelDir: ms.modelDir, store: ms.modelStore, handler: 'translation' });
    log.info({ store: ms.modelStore, modelDir: ms.modelDir, entries: written.length }, 'model store archived');
  } catch (err) {
    // Typically an empty or unmounted models volume: say which variable points where, without a stack.
    log.fatal(
      { MODEL_DIR: ms.modelDir, MODEL_STORE: ms.modelStore, err: (err as Error).message },
      'cannot archive the model store',
    );
    process.exit(1);
  }

  const entry = resolveEntry(import.meta.url, '../../model-server/main');
  const child = fork(entry.file, [], { execArgv: entry.execArgv, stdio: 'inherit' });
  let stopping = false;
  let failed = false;
  const stop = (signal: NodeJS.Signals) => {
    stopping = true;
    log.info({ signal }, 'passing the signal to the model server (it drains)');
    child.kill(signal);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  child.on('exit', (code, signal) => {
    rmSync(readyFile, { force: true });
    log.info({ code, signal }, 'model server exited');
    process.exit(failed ? 1 : (code ?? 1));
  });
  let ports: ListeningMessage['ports'] | undefined;
  child.on('message', (message: ListeningMessage | string) => {
    if (typeof message === 'object' && message.type === 'listening') {
      ports = message.ports;
      process.send?.(message);
      return;
    }
    if (message !== 'ready' || ports === undefined) return;
    register(config, languages, ports.management, log).then(
      () => {
        if (stopping) return;
        // Written beside it, then renamed: whoever sees the file (the startupProbe, an operator) sees it whole.
        const partial = `${readyFile}.partial`;
        writeFileSync(partial, `${new Date().toISOString()} ${languages.join(' ')}\n`);
        renameSync(partial, readyFile);
        log.info({ languages: languages.length, readyFile }, 'every language registered: ready');
      },
      (err: unknown) => {
        if (stopping) return; // SIGTERM during start-up: the model server is already draining
        log.error({ err: (err as Error).message }, 'registration failed: stopping the model server');
        failed = true;
        child.kill('SIGTERM');
      },
    );
  });
}

// Run as a program only (the test imports registrationUrl).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
