/**
 * @module bench/router-cluster — runs N router instances on one shared port with node:cluster, the mechanism
 * pm2's cluster mode uses underneath (its God daemon is a cluster primary), without a pm2 daemon that would
 * outlive the bench: `node --import tsx bench/router-cluster.ts <instances>`, configuration from the env.
 *
 * Prints `{"msg":"router cluster listening","port":N,"instances":N}` once every instance listens (each one
 * reports its port over IPC, as it does to pm2), and reports `{type: 'listening', port, instances}` over IPC to
 * whoever started it with a channel (harness/stack.ts), as a single router does. An instance that dies stops the whole cluster (the bench
 * must not measure fewer routers than it reports). SIGTERM/SIGINT stop every instance (each drains) and exit.
 */
import cluster, { type Worker } from 'node:cluster';
import { fileURLToPath } from 'node:url';

const instances = Number(process.argv[2]);
if (!(Number.isInteger(instances) && instances >= 1)) {
  process.stderr.write('usage: router-cluster.ts <instances ≥ 1>\n');
  process.exit(2);
}
const source = import.meta.url.endsWith('.ts');
const routerMain = fileURLToPath(new URL(`../router/main.${source ? 'ts' : 'js'}`, import.meta.url));

cluster.setupPrimary({ exec: routerMain, execArgv: process.execArgv, silent: false });
let stopping = false;
let listening = 0;
const workers: Worker[] = [];
for (let i = 0; i < instances; i++) {
  const worker = cluster.fork({ ROUTER_INSTANCE: String(i) });
  workers.push(worker);
  worker.on('message', (message: { type?: string; port?: number }) => {
    if (message?.type !== 'listening') return;
    listening++;
    if (listening === instances) {
      process.stdout.write(`${JSON.stringify({ msg: 'router cluster listening', port: message.port, instances })}\n`);
      process.send?.({ type: 'listening', port: message.port, instances });
    }
  });
}
cluster.on('exit', (worker, code, signal) => {
  if (stopping) return;
  process.stderr.write(`router cluster: instance ${worker.id} exited (${code ?? signal}); stopping the cluster\n`);
  stop(1);
});

function stop(code: number): void {
  if (stopping) return;
  stopping = true;
  const alive = workers.filter((w) => !w.isDead());
  if (alive.length === 0) process.exit(code);
  let left = alive.length;
  for (const w of alive) {
    w.once('exit', () => {
      if (--left === 0) process.exit(code);
    });
    w.process.kill('SIGTERM');
  }
  setTimeout(() => process.exit(code), 10_000).unref();
}
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));
