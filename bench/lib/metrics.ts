/**
 * @module bench/lib/metrics — reads the model server's Prometheus metrics: a small text-format parser and the
 * mean of a histogram (its `_sum` ÷ `_count`) over a measured window, i.e. the difference of two scrapes, so
 * the warm-up and the sanity requests before the window do not count.
 */
import { request } from 'undici';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parse Prometheus text exposition format (comments skipped; `NaN`, `+Inf`, `-Inf` understood). */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    const labelText = match[3];
    if (labelText) {
      const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      for (let m = labelRe.exec(labelText); m; m = labelRe.exec(labelText)) {
        labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      }
    }
    samples.push({ name: match[1]!, labels, value: parseValue(match[4]!) });
  }
  return samples;
}

function parseValue(text: string): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(text);
}

/** Sum and count of histogram `base` (`base_sum`, `base_count`) over every label set that matches `filter`. */
export function histogramTotals(
  samples: readonly Sample[],
  base: string,
  filter: (labels: Record<string, string>) => boolean = () => true,
): { sum: number; count: number } {
  let sum = 0;
  let count = 0;
  for (const s of samples) {
    if (!filter(s.labels)) continue;
    if (s.name === `${base}_sum`) sum += s.value;
    else if (s.name === `${base}_count`) count += s.value;
  }
  return { sum, count };
}

/**
 * The name of the first histogram whose name matches `pattern` (e.g. /batch_size/), or undefined. Lets the
 * bench follow the model server's metric name without hard-coding it twice.
 */
export function findHistogram(samples: readonly Sample[], pattern: RegExp): string | undefined {
  for (const s of samples) {
    if (s.name.endsWith('_count') && pattern.test(s.name)) return s.name.slice(0, -'_count'.length);
  }
  return undefined;
}

/** GET a metrics endpoint and parse it. */
export async function scrape(url: string): Promise<Sample[]> {
  const res = await request(url, { headersTimeout: 10_000, bodyTimeout: 10_000 });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET ${url} → ${res.statusCode}: ${text.slice(0, 200)}`);
  return parsePrometheus(text);
}

/** Mean of histogram `base` between two scrapes (`after − before`); NaN when nothing was observed. */
export function windowMean(before: readonly Sample[], after: readonly Sample[], base: string): number {
  const a = histogramTotals(before, base);
  const b = histogramTotals(after, base);
  const count = b.count - a.count;
  return count > 0 ? (b.sum - a.sum) / count : Number.NaN;
}

/** Sum of every sample named `name` (all label sets). */
export function total(samples: readonly Sample[], name: string): number {
  return samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
}

/**
 * The engine's real batch between two scrapes: rows per decoder run (`mt_engine_step_rows_total` ÷
 * `mt_engine_steps_total`, all engines); NaN when no decoder ran (echo) or the server has no such counters.
 */
export function windowRowsPerStep(before: readonly Sample[], after: readonly Sample[]): number {
  const runs = total(after, 'mt_engine_steps_total') - total(before, 'mt_engine_steps_total');
  const rows = total(after, 'mt_engine_step_rows_total') - total(before, 'mt_engine_step_rows_total');
  return runs > 0 ? rows / runs : Number.NaN;
}
