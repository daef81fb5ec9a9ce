/**
 * @module router/main — the router process: read `.env` once, listen on ROUTER_ADDRESS, drain on
 * SIGINT/SIGTERM. Run by pm2 in cluster mode (`ecosystem.config.js`): every instance listens on the same
 * port (the pm2 master shares it), says `ready` once listening (`wait_ready`), and on stop or `pm2 reload`
 * finishes what it has accepted before exiting, so a rolling reload drops no request.
 *
 * IPC (when spawned with one): `'ready'` (pm2's wait_ready), then `{type: 'listening', host, port}` (tests
 * start it on port 0). `'shutdown'` (pm2's shutdown_with_message) drains like SIGINT.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { createAdaptorServer } from '@hono/node-server';
import { pino } from 'pino';
import { configOrExit, loadConfig, readEnv, readSetupConfig } from '../common/config.js';
import { entriesOf } from '../common/config/setup-config.js';
import { answerClientErrors } from '../common/client-error.js';
import { HttpDrain, LISTEN_BACKLOG } from '../common/http-drain.js';
import { createRouterApp } from './app.js';
import { KeyedAccess } from './keys/keyed-access.js';
import { StatusSource } from './status.js';
import { Upstream } from './upstream/upstream.js';
import { GlossaryClient } from './glossaries.js';
import { DocumentJobs } from './apis/documents.js';
import { translateTexts } from './apis/translate-texts.js';
import { createLanguageRoutes } from './language-routes.js';

/**
 * Idle keep-alive connections from nginx or the front live until their client closes them: nginx's upstream
 * keepalive_timeout is 60 s and the front's agent drops idle sockets after 60 s, so the router waits longer.
 */
const KEEP_ALIVE_TIMEOUT_MS = 75_000;
/** How long connections idle when a drain starts are left for the proxy to close (see common/http-drain). */
const DRAIN_GRACE_MS = 1_000;

const root = process.cwd();
const [config, setup] = configOrExit('router', () => {
  const config = loadConfig(readEnv(root), root);
  return [config, readSetupConfig(config.router.setupConfigPath)] as const;
});
/** The default model's targets; the pairs' models add theirs (./language-routes.ts). */
const languages = Object.keys(setup.cuda_id);
/** Which entry serves each pair, for the documents translated in the background as for requests. */
const routes = createLanguageRoutes(languages, setup);
const { router } = config;
/**
 * common/logger's settings, written in batches: one write per request line cost the router as much CPU as the rest
 * of a request's handling. Lines wait for 4 KiB of them or half a second, and go out through `process.stdout`,
 * which pm2 captures in cluster mode (a direct write to fd 1 bypasses its capture: the lines never reached
 * router-out.log); the rest is written at exit.
 */
class BatchedStdout {
  #pending = '';
  #timer: NodeJS.Timeout | undefined;

  write(line: string): void {
    this.#pending += line;
    if (this.#pending.length >= 4_096) this.flush();
    else this.#timer ??= setTimeout(() => this.flush(), 500).unref();
  }

  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending === '') return;
    process.stdout.write(this.#pending);
    this.#pending = '';
  }
}
const logDestination = new BatchedStdout();
const logger = pino({ name: 'router', level: config.logLevel, base: { pid: process.pid } }, logDestination);

/**
 * Each language's line in this instance: room for its share of what the model server would queue for that
 * language (JOB_QUEUE_SIZE over the instances, as pm2 starts one per core for ROUTER_INSTANCES=0), and never less
 * than 4 × its connections. Across the cluster a language's backlog then reaches about the model server's own
 * bound before anyone is refused; clients up to that many wait in order instead of being refused and retrying.
 */
const instances = router.instances > 0 ? router.instances : availableParallelism();
const queuePerLanguage = Math.max(
  4 * router.upstreamConnections,
  Math.ceil(config.modelServer.jobQueueSize / instances),
);
const upstream = new Upstream({
  modelServers: { sources: router.modelServers, languages: entriesOf(setup), logger },
  connections: router.upstreamConnections,
  queue: queuePerLanguage,
  timeoutMs: router.upstreamTimeoutMs,
  maxResponseBytes: router.maxUpstreamBytes,
  ...(config.modelServer.tokenAuth ? { authorization: inferenceKeyReader(config.modelServer.keyFile) } : {}),
});
const status = new StatusSource({ url: router.statusUrl, cacheCounters: router.cacheDisclose });
let access: KeyedAccess | undefined;
try {
  access =
    router.apiKeys === undefined
      ? undefined
      : new KeyedAccess({ keys: router.apiKeys, store: router.usageStore, logger });
} catch (err) {
  process.stderr.write(`router: ${(err as Error).message}\n`);
  process.exit(2);
}
// Every instance of this machine shares the folder: a client's next call about a document may reach any of them. A
// folder that cannot be made (a read-only RUN_DIR) leaves document translation off, not the router down.
let documents: DocumentJobs | undefined;
try {
  documents = new DocumentJobs({
    dir: path.join(config.runDir, 'documents'),
    translate: (request) => translateTexts({ languages, upstream, routes }, request),
    logger,
  });
} catch (err) {
  logger.warn({ err: (err as Error).message }, 'document translation is off: RUN_DIR/documents cannot be made');
}
const app = createRouterApp(
  {
    maxBodyBytes: router.maxBodyBytes,
    languages,
    ...(setup.pairs === undefined ? {} : { routes: setup }),
    logBodies: router.logBodies,
    maxRequestChars: config.modelServer.maxRequestChars,
    nativeApiOpen: router.nativeApiOpen,
    publicUrl: router.publicUrl,
  },
  {
    upstream,
    logger,
    status,
    glossaries: new GlossaryClient(upstream, router.upstreamTimeoutMs),
    ...(documents === undefined ? {} : { documents }),
    ...(access === undefined ? {} : { access }),
  },
);
const server = createAdaptorServer({ fetch: app.fetch }) as Server;
server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1_000;
const drain = new HttpDrain(server);
answerClientErrors(server);

server.once('error', (err) => {
  logger.fatal({ err, address: router.address }, 'router cannot listen');
  process.exit(1);
});
server.listen({ port: router.address.port, host: router.address.host, backlog: LISTEN_BACKLOG }, () => {
  const { address, port } = server.address() as AddressInfo;
  logger.info({ address, port, modelServers: router.modelServers, languages: languages.length }, 'router listening');
  process.send?.('ready');
  process.send?.({ type: 'listening', host: address, port });
});

/**
 * TOKEN_AUTH: the model server's inference key from its key file (TorchServe's key_file.json layout), read on
 * first use and again when the model server answers 401 (it writes new keys at each start).
 */
function inferenceKeyReader(keyFile: string): (refresh: boolean) => string | undefined {
  let header: string | undefined;
  return (refresh) => {
    if (header === undefined || refresh) {
      try {
        const keys = JSON.parse(readFileSync(keyFile, 'utf8')) as { inference?: { key?: unknown } };
        header = typeof keys.inference?.key === 'string' ? `Bearer ${keys.inference.key}` : undefined;
      } catch (err) {
        logger.warn({ keyFile, err: (err as Error).message }, 'TOKEN_AUTH is on but the key file cannot be read');
        header = undefined;
      }
    }
    return header;
  };
}

async function shutdown(reason: string): Promise<void> {
  if (drain.draining) return;
  logger.info({ reason, inFlight: drain.inFlight }, 'router draining');
  const [clean] = await Promise.all([
    drain.drain({ graceMs: DRAIN_GRACE_MS, timeoutMs: router.upstreamTimeoutMs }),
    documents?.close(router.upstreamTimeoutMs),
  ]);
  await Promise.all([upstream.close(), status.close(), access?.close()]);
  logger.info({ clean }, 'router stopped');
  exitWhenIdle(clean ? 0 : 1);
}

/**
 * Exit once pending output is written. Under pm2 the log lines travel through pipes and file streams that an
 * immediate `process.exit` cuts off (the last lines, "router stopped" among them, were lost): let the event loop
 * empty instead — the IPC channel to pm2 must not hold it open — with a hard exit as the backstop.
 */
function exitWhenIdle(code: number): void {
  process.exitCode = code;
  logDestination.flush();
  process.channel?.unref();
  setTimeout(() => process.exit(code), 2_000).unref();
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('message', (message) => {
  if (message === 'shutdown') void shutdown('shutdown message');
});
