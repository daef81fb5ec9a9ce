/**
 * pm2 ecosystem of mt-serve: the model server (fork), the router (cluster, ROUTER_INSTANCES), the front
 * (nginx when installed, else the built-in proxy: FRONT=auto|nginx|builtin). Logs under LOG_DIR (./logs).
 *
 *     npx pm2 start ecosystem.config.js      # or: npm start (builds, archives, registers the languages)
 *     npx pm2 reload router                  # rolling restart of the router cluster, drops no request
 *     npx pm2 stop ecosystem.config.js       # or: npm stop
 *
 * This is an ES module (package.json has "type": "module"). pm2 7 loads ecosystem files with require(), which
 * Node >= 20.19 supports for ES modules without top-level await (require(esm)); pm2 reads the named export
 * `apps`. Settings come from the one config loader (dist/common/config.js: .env, then the environment), so run
 * `npm run build` first (scripts/start.sh does).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** @type {import('./common/config.js')} */
let configModule;
try {
  configModule = require('./dist/common/config.js');
} catch (err) {
  throw new Error(
    `ecosystem.config.js: cannot load dist/common/config.js (run \`npm run build\` first): ${err.message}`,
  );
}
const config = configModule.loadConfig(configModule.readEnv(root), root);

/** Drain budgets: pm2 SIGKILLs a process that has not exited kill_timeout ms after SIGINT. */
const routerDrainMs = config.router.upstreamTimeoutMs + 5_000;
/** The model server drains for at most 30 s (model-server/main.ts SHUTDOWN_GRACE_MS). */
const modelServerDrainMs = 35_000;

const logs = (name) => ({
  out_file: path.join(config.logDir, `${name}-out.log`),
  error_file: path.join(config.logDir, `${name}-error.log`),
  merge_logs: true,
});

/**
 * USAGE_STORE_SERVER=true: Redis (or Valkey), as Debian installs it, on USAGE_STORE's address, for the routers'
 * API key usage (router/keys/redis-usage-store.ts); counts kept in RUN_DIR/usage-store (append-only file).
 */
function usageStoreApp() {
  const store = config.router.usageStore;
  if (store.kind !== 'redis')
    throw new Error('ecosystem.config.js: USAGE_STORE_SERVER=true needs USAGE_STORE=redis://…');
  const server = ['/usr/bin/redis-server', '/usr/bin/valkey-server'].find((bin) => existsSync(bin));
  if (server === undefined)
    throw new Error(
      'ecosystem.config.js: USAGE_STORE_SERVER=true, but neither redis-server nor valkey-server is installed',
    );
  const { hostname, port } = new URL(store.url);
  const dir = path.join(config.runDir, 'usage-store');
  mkdirSync(dir, { recursive: true });
  return {
    name: 'usage-store',
    script: server,
    args: ['--bind', hostname, '--port', port || '6379', '--dir', dir, '--appendonly', 'yes', '--save', ''],
    interpreter: 'none',
    exec_mode: 'fork',
    instances: 1,
    ...logs('usage-store'),
  };
}

export const apps = [
  ...(config.router.usageStoreServer ? [usageStoreApp()] : []),
  {
    name: 'model-server',
    script: path.join(root, 'dist/model-server/main.js'),
    cwd: root,
    exec_mode: 'fork',
    instances: 1,
    kill_timeout: modelServerDrainMs,
    max_restarts: 10,
    min_uptime: 5_000,
    ...logs('model-server'),
  },
  {
    name: 'router',
    script: path.join(root, 'dist/router/main.js'),
    cwd: root,
    exec_mode: 'cluster',
    // 0 → pm2's "max": one instance per core.
    instances: config.router.instances === 0 ? 'max' : config.router.instances,
    // A reloaded instance takes traffic once it says 'ready' (it is listening); the old one then drains.
    wait_ready: true,
    listen_timeout: 15_000,
    kill_timeout: routerDrainMs,
    ...logs('router'),
  },
  {
    name: 'front',
    script: path.join(root, 'dist/front/main.js'),
    cwd: root,
    exec_mode: 'fork',
    instances: 1,
    wait_ready: true,
    listen_timeout: 20_000,
    kill_timeout: 30_000,
    // pm2 signals the whole process tree by default: nginx would get SIGINT itself, which is its *fast* shutdown
    // (open connections dropped). Signal front/main.ts alone; it turns SIGINT into nginx's graceful SIGQUIT.
    treekill: false,
    ...logs('front'),
  },
];
