import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { accepts, CLAIMS, claimPort, ephemeralLow, freePort } from './ports.js';
import { ROOT, tsx } from './processes.js';

describe('freePort', () => {
  it('never hands one port to two processes of a run, even when both ask at once', async () => {
    // 2 × 400 draws from about 12,000 ports: a dozen coincide on average, so only the claims keep them apart. Each
    // child stays alive until both have answered: a claim lasts as long as its process.
    const script = `import { freePort } from ${JSON.stringify(path.join(ROOT, 'harness/ports.ts'))};
const ports = await Promise.all(Array.from({ length: 400 }, () => freePort()));
console.log(JSON.stringify(ports));
process.stdin.resume().on('end', () => process.exit(0));`;
    const file = path.join(tmpdir(), `ports-child-${process.pid}.mts`);
    writeFileSync(file, script);
    const children = [1, 2].map(() => spawn(process.execPath, ['--import', tsx(), file], { cwd: ROOT }));
    try {
      const answers = await Promise.all(
        children.map(async (child) => {
          const [line] = (await once(createInterface({ input: child.stdout }), 'line')) as [string];
          return JSON.parse(line) as number[];
        }),
      );
      const ports = answers.flat();
      expect(ports).toHaveLength(800);
      expect(new Set(ports).size).toBe(800);
    } finally {
      for (const child of children) child.stdin.end();
      rmSync(file, { force: true });
    }
  });

  it('gives ports below the ephemeral range, where nothing listens until its server binds', async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(new Set(ports).size).toBe(20);
    for (const port of ports) expect(port).toBeLessThan(ephemeralLow());
    for (const port of ports) expect(await accepts(port)).toBe(false);
  });

  it('takes over the claim of a process that is gone, never that of one alive', async () => {
    const port = await freePort();
    expect(claimPort(port)).toBe(false); // its own claim
    const claims = path.join(CLAIMS, String(port));
    const holder = spawn('sleep', ['30']);
    try {
      writeFileSync(claims, String(holder.pid));
      expect(claimPort(port)).toBe(false);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((resolve) => holder.once('exit', resolve));
    }
    expect(claimPort(port)).toBe(true);
  });
});
