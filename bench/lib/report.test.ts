import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkTarget,
  formatNumber,
  machineInfo,
  markdownTable,
  renderMarkdown,
  section,
  writeReport,
  type Report,
} from './report.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function sampleReport(): Report {
  const s = section('engine', 'Engine limit', 'The engine alone.');
  s.tables.push({
    title: 'Tokens/s',
    columns: ['Batch', 'tokens/s', 'ratio'],
    rows: [
      [1, 12.345, 0.5],
      [64, 150.2, Number.NaN],
    ],
    note: 'a | b',
  });
  s.targets.push(checkTarget('ratio at batch 64', 0.68, '>=', 0.75));
  s.notes.push('Counted: decoder GEMMs.');
  s.data = { ratio: Number.NaN, tokens: [1, 2] };
  return {
    title: 'mt-serve benchmark',
    command: 'npm run bench -- --quick',
    mode: 'quick',
    startedAt: '2026-01-01T00:00:00.000Z',
    machine: machineInfo(),
    settings: { newTokens: 16 },
    sections: [s],
  };
}

describe('report', () => {
  it('checks targets in both directions and says by how much one is missed', () => {
    const missed = checkTarget('x', 0.6, '>=', 0.75);
    expect(missed.met).toBe(false);
    expect(missed.verdict).toBe('MISSED by 0.15: 0.60, target >= 0.75 (20.0% short)');
    const met = checkTarget('memory', 1.1, '<=', 1.25, '×');
    expect(met.met).toBe(true);
    expect(met.verdict).toBe('met: 1.10× <= 1.25× (12.0% margin)');
    const over = checkTarget('memory', 2.5, '<=', 1.25, '×');
    expect(over.verdict).toMatch(/^MISSED by 1.25×: 2.50×, target <= 1.25× \(100% over\)$/);
    expect(checkTarget('y', Number.NaN, '>=', 1)).toMatchObject({ met: false, verdict: 'not measured' });
  });

  it('formats numbers for humans', () => {
    expect(formatNumber(1234.5)).toBe('1235');
    expect(formatNumber(12.345)).toBe('12.3');
    expect(formatNumber(1.2345)).toBe('1.23');
    expect(formatNumber(0.01234)).toBe('0.012');
    expect(formatNumber(Number.NaN)).toBe('n/a');
    expect(formatNumber(64)).toBe('64');
  });

  it('renders Markdown tables with escaped pipes and right-aligned numbers', () => {
    const md = markdownTable({ title: 't', columns: ['a', 'b'], rows: [['x|y', 2.5]] });
    expect(md).toBe('| a | b |\n| --- | ---: |\n| x\\|y | 2.50 |');
  });

  it('writes JSON (NaN as null) and Markdown atomically, with targets summarised first', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'bench-report-'));
    dirs.push(dir);
    const report = sampleReport();
    const files = writeReport(report, dir, 'latest-quick');
    expect(readdirSync(dir).sort()).toEqual(['latest-quick.json', 'latest-quick.md']);
    const json = JSON.parse(readFileSync(files.json, 'utf8'));
    expect(json.sections[0].data).toEqual({ ratio: null, tokens: [1, 2] });
    expect(json.sections[0].targets[0].met).toBe(false);
    const md = readFileSync(files.markdown, 'utf8');
    expect(md).toBe(`${renderMarkdown(report)}\n`);
    expect(md.indexOf('## Targets')).toBeLessThan(md.indexOf('## Engine limit'));
    expect(md).toContain('| 64 | 150 | n/a |');
    expect(md).toContain('MISSED by 0.070');
    expect(md).toContain(`Machine: ${report.machine.cpus} CPUs`);
  });
});
