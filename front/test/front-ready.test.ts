/**
 * When the nginx front says it is ready. nginx's master opens the listening socket before it forks its workers,
 * and the kernel accepts connections into the backlog meanwhile: a front that announced "ready" on the first
 * accepted connection could do so while no worker existed yet (a process sample taken then found the master
 * alone). The front must announce only once something answers HTTP on the port.
 *
 * A stand-in for the nginx binary (NGINX_BIN) plays both cases deterministically: a master that accepts and never
 * answers (no worker yet), and one that answers. It passes `nginx -t` and listens on the front's port.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type ManagedProcess } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { isListening, startEntry } from '../../harness/processes.js';

/** Whether something accepts a TCP connection on the loopback `port` (the connection is closed at once). */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

const FAKE_NGINX = `#!/usr/bin/env node
if (process.argv.includes('-t')) process.exit(0);
const net = require('node:net');
const port = Number(process.env.FAKE_NGINX_PORT);
const answers = process.env.FAKE_NGINX_ANSWERS === '1';
const held = [];
net
  .createServer((socket) => {
    if (answers) socket.end('HTTP/1.1 400 Bad Request\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n');
    else held.push(socket);
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

  const start = async (answers: boolean) => {
    const port = await freePort();
    const routerPort = await freePort();
    const front = startEntry({
      entry: 'front/main.ts',
      name: `front-ready-${answers ? 'answers' : 'silent'}`,
      cwd: dir,
      env: {
        FRONT: 'nginx',
        NGINX_BIN: binary,
        FRONT_ADDRESS: `127.0.0.1:${port}`,
        ROUTER_ADDRESS: `127.0.0.1:${routerPort}`,
        RUN_DIR: path.join(dir, `run-${port}`),
        FAKE_NGINX_PORT: String(port),
        FAKE_NGINX_ANSWERS: answers ? '1' : '0',
        LOG_LEVEL: 'warn',
      },
    });
    fronts.push(front);
    return { front, port };
  };

  it('does not announce ready while the port accepts but nothing answers HTTP', async () => {
    const { front, port } = await start(false);
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

  it('announces ready once nginx answers HTTP on its port', async () => {
    const { front, port } = await start(true);
    expect(await front.message(isListening)).toMatchObject({ front: 'nginx', port });
  });
});
