/**
 * When the nginx front says it is ready. nginx's master opens the listening socket before it forks its workers,
 * and the kernel accepts connections into the backlog meanwhile: a front that announced "ready" on the first
 * accepted connection could do so while no worker existed yet (a process sample taken then found the master
 * alone). Nor may any HTTP answer do: a process that held the port first (another server took it between the
 * front's choice of port and nginx's bind) answers while nginx retries its bind, and a front that took that for nginx announced
 * ready and sent every request to the other server. The front announces once its own config's ready path answers.
 *
 * A stand-in for the nginx binary (NGINX_BIN) plays the cases deterministically: a master that accepts and never
 * answers (no worker yet), another server on the port (400 to everything), and one that answers the ready path the
 * rendered config names (204). It passes `nginx -t` and listens on the front's port.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accepts, freePort } from '../../harness/ports.js';
import type { ManagedProcess } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { isListening, startEntry } from '../../harness/processes.js';

const FAKE_NGINX = `#!/usr/bin/env node
if (process.argv.includes('-t')) process.exit(0);
const { readFileSync } = require('node:fs');
const net = require('node:net');
const port = Number(process.env.FAKE_NGINX_PORT);
const mode = process.env.FAKE_NGINX_MODE;
const conf = readFileSync(process.argv[process.argv.indexOf('-c') + 1], 'utf8');
const ready = /location = (\\S+) \\{ return 204; \\}/.exec(conf)[1];
const held = [];
net
  .createServer((socket) => {
    if (mode === 'silent') return held.push(socket);
    socket.once('data', (data) => {
      const path = data.toString().split(' ')[1];
      const status = mode === 'ready' && path === ready ? '204 No Content' : '400 Bad Request';
      socket.end('HTTP/1.1 ' + status + '\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n');
    });
  })
  .listen(port, '127.0.0.1');
for (const signal of ['SIGQUIT', 'SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
`;

describe('front: nginx readiness', () => {
  let dir: string;
  let binary: string;
  const fronts: ManagedProcess[] = [];

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'front-ready-'));
    binary = path.join(dir, 'nginx');
    writeFileSync(binary, FAKE_NGINX);
    chmodSync(binary, 0o755);
  });
  afterAll(async () => {
    for (const front of fronts) await front.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (mode: 'silent' | 'other' | 'ready') => {
    const port = await freePort();
    const routerPort = await freePort();
    const front = startEntry({
      entry: 'front/main.ts',
      name: `front-ready-${mode}`,
      cwd: dir,
      env: {
        FRONT: 'nginx',
        NGINX_BIN: binary,
        FRONT_ADDRESS: `127.0.0.1:${port}`,
        ROUTER_ADDRESS: `127.0.0.1:${routerPort}`,
        RUN_DIR: path.join(dir, `run-${port}`),
        FAKE_NGINX_PORT: String(port),
        FAKE_NGINX_MODE: mode,
        LOG_LEVEL: 'warn',
      },
    });
    fronts.push(front);
    return { front, port };
  };

  for (const [mode, what] of [
    ['silent', 'the port accepts but nothing answers HTTP'],
    ['other', 'what answers on the port is not its own config'],
  ] as const) {
    it(`does not announce ready while ${what}`, async () => {
      const { front, port } = await start(mode);
      let announced = false;
      void front.message(isListening, 120_000).then(
        () => (announced = true),
        () => undefined,
      );
      // The stand-in listens once the front has rendered the config and started it; a front that took an accepted
      // connection for readiness announces within one 50 ms retry of that.
      await until('the stand-in nginx to accept connections', () => accepts(port), 60_000);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(announced).toBe(false);
      expect(front.alive).toBe(true);
    });
  }

  it('announces ready once nginx answers its ready path on its port', async () => {
    const { front, port } = await start('ready');
    expect(await front.message(isListening)).toMatchObject({ front: 'nginx', port });
  });
});
