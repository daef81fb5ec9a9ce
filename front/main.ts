/**
 * @module front/main — the front process (pm2 app "front") on FRONT_ADDRESS (7777): nginx when it is
 * installed, else the built-in proxy (`FRONT=auto`; `nginx` or `builtin` force one). It says which, in its log
 * and in every reply's `x-front` header.
 *
 * With nginx this process supervises it: renders RUN_DIR/nginx.conf from `nginx/nginx.conf`, checks it
 * (`nginx -t`, its message on failure), runs nginx in the foreground, turns SIGINT/SIGTERM into nginx's
 * graceful stop (SIGQUIT), SIGHUP into re-render + reload, and exits when nginx does (pm2 restarts it).
 *
 * IPC (when spawned with one): `'ready'` once the front answers HTTP on its port (pm2's wait_ready), then
 * `{type: 'listening', front, host, port}`. `'shutdown'` stops like SIGINT.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { configOrExit, loadConfig, readEnv } from '../common/config.js';
import { HttpDrain, LISTEN_BACKLOG } from '../common/http-drain.js';
import { createLogger, type Logger } from '../common/logger.js';
import { createBuiltinProxy } from './builtin-proxy.js';
import { checkNginxConfig, findNginx, spawnNginx, writeNginxConfig, type NginxFiles } from './nginx.js';

/** Longest wait for nginx to answer on its port before the start counts as failed. */
const NGINX_START_TIMEOUT_MS = 15_000;

const root = process.cwd();
const config = configOrExit('front', () => loadConfig(readEnv(root), root));
const logger = createLogger('front', config.logLevel);
const { front } = config;
/**
 * The router answers everything it accepted within its upstream timeout (a 504 at worst), so a front still waiting
 * past it (and its slack, FRONT_TIMEOUT_SLACK_MS) waits on a connection nobody will answer: a request that was being
 * handed to a router instance when that instance was killed stays open in the cluster master forever (Node's cluster
 * round-robin never closes a handle whose worker died before taking it). The front then answers 504 instead of
 * hanging for the seed's 24 hours.
 */
const routerTimeoutMs = config.router.upstreamTimeoutMs + front.timeoutSlackMs;

const nginxBinary = front.kind === 'builtin' ? undefined : findNginx(process.env);
if (front.kind === 'nginx' && nginxBinary === undefined) {
  process.stderr.write('front: FRONT=nginx but no nginx executable was found (PATH, /usr/sbin; or set NGINX_BIN)\n');
  process.exit(2);
}

let stopping = false;
const announce = (kind: 'nginx' | 'builtin', port: number) => {
  logger.info({ front: kind, host: front.host, port, router: front.routerUrl }, `front listening (${kind})`);
  process.send?.('ready');
  process.send?.({ type: 'listening', front: kind, host: front.host, port });
};

if (nginxBinary !== undefined) runNginx(nginxBinary, logger);
else runBuiltin(logger);

function runBuiltin(log: Logger): void {
  const { server, close } = createBuiltinProxy(
    { routerUrl: front.routerUrl, maxBodyBytes: front.maxBodyBytes, timeoutMs: routerTimeoutMs },
    { logger: log },
  );
  const drain = new HttpDrain(server);
  server.once('error', (err) => {
    log.fatal({ err }, 'front cannot listen');
    process.exit(1);
  });
  server.listen({ port: front.port, host: front.host, backlog: LISTEN_BACKLOG }, () =>
    announce('builtin', (server.address() as AddressInfo).port),
  );
  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason, inFlight: drain.inFlight }, 'front draining');
    const clean = await drain.drain({ graceMs: 1_000, timeoutMs: 120_000 });
    close();
    process.exit(clean ? 0 : 1);
  };
  onStop(stop);
}

function runNginx(binary: string, log: Logger): void {
  const readyPath = `/_mt_ready/${randomUUID()}`;
  const render = (): NginxFiles => {
    const files = writeNginxConfig(templatePath(), {
      listen: { host: front.host, port: front.port },
      router: config.router.address,
      maxBodyBytes: front.maxBodyBytes,
      routerTimeoutS: Math.ceil(routerTimeoutMs / 1000),
      runDir: config.runDir,
      logDir: config.logDir,
      readyPath,
    });
    checkNginxConfig(binary, files);
    return files;
  };
  let files: NginxFiles;
  try {
    files = render();
  } catch (err) {
    process.stderr.write(`front: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const nginx = spawnNginx(binary, files);
  log.info({ binary, pid: nginx.pid, conf: files.confPath }, 'nginx started');
  // Whatever ends this process (a crash, process.exit) ends nginx with it: it must not hold the port orphaned.
  // (SIGKILL cannot be caught; pm2 kills the whole process tree, and tests stop the front with SIGTERM.)
  process.once('exit', () => {
    if (nginx.exitCode === null && nginx.signalCode === null) nginx.kill('SIGTERM');
  });
  nginx.once('exit', (code, signal) => {
    if (!stopping) log.error({ code, signal }, 'nginx exited unexpectedly');
    process.exit(stopping ? (code ?? 0) : 1);
  });
  void waitForNginx(front.port, readyPath, NGINX_START_TIMEOUT_MS).then(
    () => announce('nginx', front.port),
    () => {
      log.fatal({ port: front.port }, `nginx did not answer on port ${front.port} within ${NGINX_START_TIMEOUT_MS} ms`);
      nginx.kill('SIGTERM');
    },
  );
  onStop(async (reason) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason }, 'front stopping nginx gracefully');
    nginx.kill('SIGQUIT');
  });
  process.on('SIGHUP', () => {
    try {
      render();
      nginx.kill('SIGHUP');
      log.info('nginx config re-rendered and reloaded');
    } catch (err) {
      log.error({ err: (err as Error).message }, 'nginx config rejected; still serving the previous one');
    }
  });
}

function onStop(stop: (reason: string) => Promise<void>): void {
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('message', (message) => {
    if (message === 'shutdown') void stop('shutdown message');
  });
}

/** nginx/nginx.conf beside the sources (front/main.ts) or beside dist/ (dist/front/main.js). */
function templatePath(): string {
  for (const relative of ['../nginx/nginx.conf', '../../nginx/nginx.conf']) {
    const candidate = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(candidate)) return candidate;
  }
  throw new Error('nginx/nginx.conf not found beside the front sources');
}

/**
 * Resolves once this nginx answers `readyPath` on `port` (loopback) with its 204, retrying every 50 ms. An accepted
 * connection is not enough: nginx's master opens the listening socket before it forks the workers, and the kernel
 * accepts into the backlog meanwhile, so "ready" could come before any worker exists. Nor is any HTTP answer: a
 * process that held the port first answers too, for the seconds nginx retries its bind before it exits (and this
 * process with it); only this start's config answers its own path with 204, without the router.
 */
function waitForNginx(port: number, readyPath: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const host = front.host === '0.0.0.0' || front.host === '::' ? '127.0.0.1' : front.host;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const retry = () => {
        if (Date.now() > deadline) reject(new Error('timeout'));
        else setTimeout(attempt, 50);
      };
      const request = httpGet({ host, port, path: readyPath, agent: false, timeout: 1000 }, (response) => {
        response.resume();
        if (response.statusCode === 204) resolve();
        else retry();
      });
      request.once('timeout', () => request.destroy(new Error('timeout')));
      request.once('error', retry);
    };
    attempt();
  });
}
