/**
 * @module test/reliability/support/router-cluster — N router instances sharing one port through node:cluster, the
 * mechanism pm2's cluster mode runs on, for the soak and drills that want a router cluster without a pm2 daemon:
 * configuration from the environment (as router/main.ts reads it), `MT_ROUTER_INSTANCES` instances. Reports
 * `{type: 'listening', port}` over IPC once every instance listens. Like pm2, it replaces an instance that dies;
 * SIGTERM drains every instance (each finishes what it accepted) and exits when they are gone.
 */
import cluster from 'node:cluster';
import { fileURLToPath } from 'node:url';

const instances = Number(process.env.MT_ROUTER_INSTANCES ?? 2);
cluster.setupPrimary({
  exec: fileURLToPath(new URL('../../../router/main.ts', import.meta.url)),
  execArgv: process.execArgv,
});

let stopping = false;
let listening = 0;
const fork = () => {
  const worker = cluster.fork();
  worker.on('message', (m: { type?: string; port?: number }) => {
    if (m?.type !== 'listening') return;
    listening += 1;
    if (listening === instances) process.send?.({ type: 'listening', port: m.port });
  });
};
for (let i = 0; i < instances; i++) fork();
cluster.on('exit', () => {
  if (stopping) {
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
    return;
  }
  fork(); // as pm2 does: a dead instance is replaced
});
process.on('SIGTERM', () => {
  stopping = true;
  const alive = Object.values(cluster.workers ?? {});
  if (alive.length === 0) process.exit(0);
  for (const w of alive) w?.process.kill('SIGTERM');
});
