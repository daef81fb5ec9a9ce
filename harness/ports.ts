/**
 * @module harness/ports — ports for servers that tests, the benchmark and the soak start later (a child process, a
 * pm2 app, start.sh, nginx), claimed so that no other process of the run takes them meanwhile; and whether anything
 * accepts connections on one yet.
 *
 * A port the kernel picked for a bind to port 0 and then released is free again for every parallel test's own
 * bind to port 0: between the pick and the child's bind (seconds under pm2) another test's model server took one,
 * and a start.sh that expected its front found a model server's 404. The ports given here come from below the
 * kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which a bind to port 0 or an outgoing
 * connection never uses, and each is claimed with a file created exclusively in one directory shared by every
 * process of the run (vitest's forks, the benchmark's clients), so two of them cannot be handed the same port.
 * A claim lasts as long as the process that made it; one whose process is gone is taken over.
 */
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { alive } from './processes.js';

/** Where claims are made: one file per port, holding the claiming process's pid. */
export const CLAIMS = path.join(tmpdir(), 'mt-serve-port-claims');

/** The first port of the kernel's ephemeral range. */
export function ephemeralLow(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768;
  } catch {
    return 32_768; // not Linux: the common default
  }
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * Whether this process now holds `port`'s claim (a second claim of a port it holds is refused). A claim file is
 * only ever created exclusively or, when its process is gone, rewritten under a takeover lock after reading it again:
 * two processes that both found it stale cannot both take it. (A process killed while holding a takeover lock leaves
 * that one port unclaimable; there are thousands.)
 */
export function claimPort(port: number): boolean {
  const file = path.join(CLAIMS, String(port));
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  // Empty while its creator writes it: that process is alive.
  const holder = read(file);
  if (!holder || Number(holder) === process.pid || alive(Number(holder))) return false;
  const lock = `${file}.takeover`;
  try {
    writeFileSync(lock, String(process.pid), { flag: 'wx' });
  } catch {
    return false; // another process is taking it over
  }
  try {
    if (read(file) !== holder) return false;
    writeFileSync(file, String(process.pid));
    return true;
  } finally {
    unlinkSync(lock);
  }
}

function bindable(port: number, host: string): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}

/**
 * A port free on `host` that no other process of this run was given (see the module's comment). The caller's
 * server binds it whenever it starts; until then a connection to it is refused.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  mkdirSync(CLAIMS, { recursive: true });
  const low = ephemeralLow();
  const from = Math.min(20_000, low - 1_000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (claimPort(port) && (await bindable(port, host))) return port;
  }
  throw new Error(`no free port in ${from}-${low - 1} on ${host} (claims: ${CLAIMS})`);
}

/** Whether something accepts a TCP connection on the loopback `port` (the connection is closed at once). */
export function accepts(port: number): Promise<boolean> {
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
