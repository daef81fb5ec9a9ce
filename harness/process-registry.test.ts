import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from './ports.js';
import { startProcess, stopAll, tempDir, waitForHttp } from './process-registry.js';
import { processTree, treeMemory } from './proc-tree.js';

const dirs: (() => void)[] = [];
afterEach(async () => {
  await stopAll();
  for (const remove of dirs.splice(0)) remove();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A script that starts a grandchild which ignores SIGTERM (a worker mid-step), prints both pids, then serves HTTP. */
function writeParentScript(dir: string): string {
  const file = path.join(dir, 'parent.mjs');
  writeFileSync(
    file,
    `import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: 'ignore' });
process.on('SIGTERM', () => process.exit(0));
createServer((req, res) => res.end('ok')).listen(Number(process.argv[2]), '127.0.0.1', () => {
  console.log(JSON.stringify({ msg: 'listening', parent: process.pid, child: child.pid }));
});
`,
  );
  return file;
}

describe('processes', () => {
  it('starts a server, finds its announcement line, and stop() leaves nothing of its tree alive', async () => {
    const { dir, remove } = tempDir('proc-test');
    dirs.push(remove);
    const port = await freePort();
    const proc = startProcess({
      name: 'parent',
      file: writeParentScript(dir),
      args: [String(port)],
      logFile: path.join(dir, 'parent.log'),
      env: { PATH: process.env.PATH },
    });
    const line = await proc.waitForLine(/"msg":"listening"/, 10_000);
    const { parent, child } = JSON.parse(line) as { parent: number; child: number };
    await waitForHttp(`http://127.0.0.1:${port}/`, proc, 10_000);
    expect(processTree(proc.pid)).toEqual(expect.arrayContaining([parent, child]));
    const memory = treeMemory([proc.pid]);
    expect(memory.processes).toBeGreaterThanOrEqual(2);
    expect(memory.rssBytes).toBeGreaterThan(10 * 2 ** 20);
    expect(memory.pssBytes).toBeGreaterThan(0);

    await proc.stop(2_000);
    expect(proc.alive).toBe(false);
    expect(alive(parent)).toBe(false);
    // The grandchild ignored SIGTERM; the group SIGKILL after the leader's exit must still reach it.
    await expect.poll(() => alive(child), { timeout: 5_000 }).toBe(false);
    expect(readFileSync(proc.logFile, 'utf8')).toContain('"msg":"listening"');
  });

  it('fails fast with the output when the process exits before it is ready', async () => {
    const { dir, remove } = tempDir('proc-test');
    dirs.push(remove);
    const file = path.join(dir, 'crash.mjs');
    writeFileSync(file, "console.error('cannot start: bad config'); process.exit(3);");
    const proc = startProcess({
      name: 'crash',
      file,
      logFile: path.join(dir, 'crash.log'),
      env: { PATH: process.env.PATH },
    });
    await expect(proc.waitForLine(/listening/, 10_000)).rejects.toThrow(
      /crash exited \(3\).*\n.*cannot start: bad config/s,
    );
    await expect(waitForHttp('http://127.0.0.1:1/', proc, 10_000)).rejects.toThrow(/crash exited before/);
  });

  it('stopAll stops every process still running', async () => {
    const { dir, remove } = tempDir('proc-test');
    dirs.push(remove);
    const file = path.join(dir, 'idle.mjs');
    writeFileSync(file, 'setInterval(() => {}, 1000);');
    const procs = [0, 1].map((i) =>
      startProcess({
        name: `idle${i}`,
        file,
        logFile: path.join(dir, `idle${i}.log`),
        env: { PATH: process.env.PATH },
      }),
    );
    await stopAll();
    expect(procs.some((p) => p.alive)).toBe(false);
    expect(existsSync(dir)).toBe(true);
  });
});
