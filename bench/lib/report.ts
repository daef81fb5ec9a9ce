/**
 * @module bench/lib/report — the benchmark report: sections of tables, targets checked against the figures,
 * the machine it ran on; written as JSON (raw numbers) and Markdown (the same tables), and printed.
 *
 * Files are written to a `.tmp` name and renamed, so an interrupted run never leaves half a report.
 */
import { readFileSync, renameSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A table cell: numbers are formatted by the column's formatter, strings printed as given. */
export type Cell = string | number;

export interface Table {
  title: string;
  columns: string[];
  rows: Cell[][];
  /** One line under the table (what a column means, what was held fixed). */
  note?: string;
}

/** A target of the issue, checked against a measured figure. */
export interface Target {
  /** What is compared, e.g. "engine tokens/s ÷ ceiling at batch 64". */
  name: string;
  measured: number;
  comparison: '>=' | '<=';
  threshold: number;
  /** Unit appended to numbers when printed ("×", "" for plain ratios). */
  unit?: string;
  /** Filled by `checkTarget`. */
  met: boolean;
  /** "met by 0.05" / "missed by 0.12 (16% short)" / "not measured". */
  verdict: string;
}

export interface Section {
  id: string;
  title: string;
  /** What the scenario measures and how, in a sentence or two. */
  description: string;
  tables: Table[];
  targets: Target[];
  notes: string[];
  /** Raw figures for the JSON report. */
  data: Record<string, unknown>;
  /** Charts written beside the Markdown as `{report name}-{id}.svg` and shown in it. */
  figures?: Figure[];
  /** Set when the scenario failed; the report still lists it. */
  error?: string;
  durationS?: number;
}

export interface Figure {
  /** File suffix, e.g. `goodput` → `latest-full-goodput.svg`. */
  id: string;
  title: string;
  /** The SVG document (left out of the JSON report; it is the file). */
  svg: string;
}

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  onnxruntime: string;
  os: string;
  loadAverageAtStart: number[];
  loadAverageAtEnd?: number[];
}

export interface Report {
  title: string;
  command: string;
  mode: 'quick' | 'full' | 'smoke';
  startedAt: string;
  finishedAt?: string;
  machine: MachineInfo;
  /** Workload and model settings shared by every scenario. */
  settings: Record<string, unknown>;
  sections: Section[];
}

/** A new, empty section. */
export function section(id: string, title: string, description: string): Section {
  return { id, title, description, tables: [], targets: [], notes: [], data: {} };
}

/** Build a target and decide whether it is met. A NaN measurement is "not measured", never met. */
export function checkTarget(
  name: string,
  measured: number,
  comparison: '>=' | '<=',
  threshold: number,
  unit = '',
): Target {
  const fmt = (v: number) => `${formatNumber(v)}${unit}`;
  if (!Number.isFinite(measured)) {
    return { name, measured, comparison, threshold, unit, met: false, verdict: 'not measured' };
  }
  const met = comparison === '>=' ? measured >= threshold : measured <= threshold;
  const gap = Math.abs(measured - threshold);
  const pct =
    threshold !== 0
      ? ` (${formatNumber((100 * gap) / Math.abs(threshold))}% ${met ? 'margin' : comparison === '>=' ? 'short' : 'over'})`
      : '';
  const verdict = met
    ? `met: ${fmt(measured)} ${comparison} ${fmt(threshold)}${pct}`
    : `MISSED by ${fmt(gap)}: ${fmt(measured)}, target ${comparison} ${fmt(threshold)}${pct}`;
  return { name, measured, comparison, threshold, unit, met, verdict };
}

/** Numbers for humans: integers as they are, 3 significant digits below 100, rounded above; "n/a" for NaN. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'n/a' : value > 0 ? '∞' : '-∞';
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 100) return Math.round(value).toString();
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  if (abs === 0) return '0';
  return value.toPrecision(2);
}

/** A ratio printed with its sign of direction: `5.3×`. */
export function formatRatio(value: number): string {
  return Number.isFinite(value) ? `${formatNumber(value)}×` : 'n/a';
}

export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'n/a';
  const mib = bytes / 2 ** 20;
  return mib >= 1024 ? `${(mib / 1024).toFixed(2)} GiB` : `${mib.toFixed(0)} MiB`;
}

function cellText(cell: Cell): string {
  return typeof cell === 'number' ? formatNumber(cell) : cell;
}

/** A Markdown table (GitHub flavour); pipes in cells are escaped. */
export function markdownTable(table: Table): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const lines = [
    `| ${table.columns.map(esc).join(' | ')} |`,
    `| ${table.columns.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...table.rows.map((row) => `| ${row.map((c) => esc(cellText(c))).join(' | ')} |`),
  ];
  return lines.join('\n');
}

/** The whole report as Markdown: summary of targets first, then each section. */
export function renderMarkdown(report: Report, name?: string): string {
  const m = report.machine;
  const out: string[] = [
    `# ${report.title}`,
    '',
    `- Command: \`${report.command}\` (${report.mode}), started ${report.startedAt}${report.finishedAt ? `, finished ${report.finishedAt}` : ''}`,
    `- Machine: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB.toFixed(1)} GiB, ${m.os}, Node ${m.node}, onnxruntime-node ${m.onnxruntime}; load average at start ${m.loadAverageAtStart.map((l) => l.toFixed(2)).join(' ')}${m.loadAverageAtEnd ? `, at end ${m.loadAverageAtEnd.map((l) => l.toFixed(2)).join(' ')}` : ''}`,
    `- Settings: ${Object.entries(report.settings)
      .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
      .join(', ')}`,
    '',
  ];
  const targets = report.sections.flatMap((s) => s.targets.map((t) => ({ s, t })));
  if (targets.length > 0) {
    out.push(
      '## Targets',
      '',
      markdownTable({
        title: 'Targets',
        columns: ['Scenario', 'Figure', 'Target', 'Measured', 'Verdict'],
        rows: targets.map(({ s, t }) => [
          s.title,
          t.name,
          `${t.comparison} ${formatNumber(t.threshold)}${t.unit ?? ''}`,
          Number.isFinite(t.measured) ? `${formatNumber(t.measured)}${t.unit ?? ''}` : 'n/a',
          t.verdict,
        ]),
      }),
      '',
    );
  }
  for (const s of report.sections) {
    out.push(`## ${s.title}`, '', s.description, '');
    if (s.error)
      out.push(`**Scenario failed:** ${s.error.split('\n')[0]}`, '', '```', s.error.slice(0, 2000), '```', '');
    for (const t of s.tables) {
      out.push(`### ${t.title}`, '', markdownTable(t), '');
      if (t.note) out.push(`_${t.note}_`, '');
    }
    for (const t of s.targets)
      out.push(`- **Target** ${t.name} ${t.comparison} ${formatNumber(t.threshold)}${t.unit ?? ''}: ${t.verdict}`);
    if (s.targets.length > 0) out.push('');
    for (const n of s.notes) out.push(`- ${n}`);
    if (s.notes.length > 0) out.push('');
    for (const f of s.figures ?? [])
      out.push(name ? `![${f.title}](${figureFile(name, f)})` : `_Figure: ${f.title}_`, '');
    if (s.durationS !== undefined) out.push(`_Scenario wall time: ${s.durationS.toFixed(0)} s._`, '');
  }
  return out.join('\n');
}

/** Write `{dir}/{name}.json` and `{dir}/{name}.md` atomically; returns their paths. */
export function writeReport(report: Report, dir: string, name: string): { json: string; markdown: string } {
  mkdirSync(dir, { recursive: true });
  const json = path.join(dir, `${name}.json`);
  const markdown = path.join(dir, `${name}.md`);
  const replacer = (key: string, value: unknown) =>
    key === 'svg' ? undefined : typeof value === 'number' && !Number.isFinite(value) ? null : value; // JSON has no NaN
  for (const s of report.sections)
    for (const f of s.figures ?? []) atomicWrite(path.join(dir, figureFile(name, f)), f.svg);
  atomicWrite(json, `${JSON.stringify(report, replacer, 2)}\n`);
  atomicWrite(markdown, `${renderMarkdown(report, name)}\n`);
  return { json, markdown };
}

function figureFile(reportName: string, figure: Figure): string {
  return `${reportName}-${figure.id}.svg`;
}

function atomicWrite(file: string, content: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content);
  renameSync(tmp, file);
}

/** The machine the report ran on: CPU count and model, memory, Node and onnxruntime versions, load. */
export function machineInfo(): MachineInfo {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (line) cpuModel = line[1]!.trim();
  } catch {
    // not Linux: os.cpus() is the best we have
  }
  let onnxruntime = 'unknown';
  try {
    const pkg = new URL('../../node_modules/onnxruntime-node/package.json', import.meta.url);
    onnxruntime = (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
  } catch {
    // reported as unknown
  }
  return {
    cpus: os.availableParallelism(),
    cpuModel,
    memoryGiB: os.totalmem() / 2 ** 30,
    node: process.version,
    onnxruntime,
    os: `${os.type()} ${os.release()}`,
    loadAverageAtStart: os.loadavg(),
  };
}
