/**
 * Issue 6.5 — the soak's short version, run the way a user runs it (`npm run soak -- --seconds 12`: a 5 s warm-up,
 * then six 2 s samples; the same script as the documented 10-minute run): the whole stack in fresh processes (tiny
 * model, router cluster ×2, front), mixed languages, its report read back from --json. Zero unexpected errors,
 * nothing unanswered, no process died, descriptors flat after the warm-up, and every layer's processes in the RSS/fd
 * tables.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { SoakReport } from '../../scripts/soak.js';
import { ROOT, tsx } from '../../harness/processes.js';

describe('npm run soak (short)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-soak-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('12 s of mixed languages through the whole stack: no errors, nothing lost, descriptors flat', async () => {
    const json = path.join(dir, 'soak.json');
    const run = await new Promise<{ code: number; out: string }>((resolve) =>
      execFile(
        process.execPath,
        [
          '--import',
          tsx(),
          path.join(ROOT, 'scripts/soak.ts'),
          '--seconds',
          '12',
          '--concurrency',
          '16',
          '--json',
          json,
        ],
        { cwd: ROOT, timeout: 120_000, maxBuffer: 16 << 20, env: { PATH: process.env.PATH, HOME: process.env.HOME } },
        (err, stdout, stderr) =>
          resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
    expect(run.code, run.out).toBe(0);
    const report = JSON.parse(readFileSync(json, 'utf8')) as SoakReport;

    expect(report.ok, report.problems.join('\n')).toBe(true);
    expect(report.tally).toMatchObject({ errors: {}, unanswered: 0, malformed: 0 });
    expect(report.tally.ok).toBe(report.tally.sent);
    expect(report.tally.sent as number).toBeGreaterThan(40);
    expect(report.died).toEqual([]);
    // Every layer is sampled at start, after the warm-up and at the end.
    for (const samples of [report.start, report.warm, report.end]) {
      const names = samples.map((s) => s.name);
      for (const role of [
        'model-server',
        'worker',
        'router (primary)',
        report.frontKind === 'nginx' ? 'nginx worker' : 'front',
      ]) {
        expect(names).toContain(role);
      }
      expect(names.filter((n) => n === 'router')).toHaveLength(2);
      for (const s of samples) expect(s.rssMiB).toBeGreaterThan(0);
    }
    for (const g of report.growth) expect(g.files, `${g.name} ${g.pid}`).toBeLessThanOrEqual(0);
    expect(report.intervals.length).toBeGreaterThanOrEqual(5);
    // The queue never backs up at this load (the default job_queue_size is 4096).
    for (const i of report.intervals) expect(i.maxQueueDepth).toBeLessThan(200);
    // What the user reads: the three tables, the time series and the verdict.
    expect(run.out).toContain('processes at start');
    expect(run.out).toContain('processes after the warm-up');
    expect(run.out).toContain('processes at the end');
    expect(run.out).toMatch(/soak: OK — zero unexpected errors/);
  }, 150_000);
});
