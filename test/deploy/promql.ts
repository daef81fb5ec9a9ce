/**
 * @module test/deploy/promql — what the deploy tests need to read Prometheus: the text exposition format (sample
 * names, their labels, each family's TYPE) and PromQL expressions, parsed with Prometheus's own Lezer grammar
 * (@prometheus-io/lezer-promql, the parser of Prometheus's web UI), never with regexes.
 */
import { parser } from '@prometheus-io/lezer-promql';

/** One scrape: every sample name with the label names seen on it, and the TYPE of every family. */
export interface Exposition {
  /** Sample name (e.g. `mt_batch_size_sum`) → label names seen on its samples. */
  samples: Map<string, Set<string>>;
  /** Family name (e.g. `mt_batch_size`) → `counter` | `gauge` | `histogram` | `summary` | `untyped`. */
  types: Map<string, string>;
}

/** Parse Prometheus text exposition format 0.0.4. */
export function parseExposition(text: string): Exposition {
  const samples = new Map<string, Set<string>>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice('# TYPE '.length).split(' ');
      types.set(name!, type!);
      continue;
    }
    if (line.startsWith('#') || line.trim() === '') continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const name = brace !== -1 && brace < space ? line.slice(0, brace) : line.slice(0, space);
    const labels = samples.get(name) ?? new Set<string>();
    if (brace !== -1 && brace < space) {
      const body = line.slice(brace + 1, line.lastIndexOf('}'));
      for (const match of body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) labels.add(match[1]!);
    }
    samples.set(name, labels);
  }
  return { samples, types };
}

/**
 * The family a sample belongs to: `x_bucket`, `x_sum`, `x_count` belong to `x` only when `x` is a histogram
 * (or, for `_sum`/`_count`, a summary); any other name — `mt_engine_steps_total`, a counter — is its own family.
 */
export function familyOf(sample: string, types: Map<string, string>): { family: string; type: string | undefined } {
  for (const suffix of ['_bucket', '_sum', '_count'] as const) {
    if (!sample.endsWith(suffix)) continue;
    const base = sample.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return { family: base, type };
  }
  return { family: sample, type: types.get(sample) };
}

/** A vector selector found in an expression, with the context the checks need. */
export interface Selector {
  metric: string;
  /** Label names its matchers name. */
  matchers: string[];
  /** Inside `histogram_quantile(...)`. */
  inHistogramQuantile: boolean;
  /** Grouping labels (`by (...)`) of every aggregation between it and the enclosing histogram_quantile. */
  groupingsToQuantile: string[][];
}

export interface ParsedQuery {
  selectors: Selector[];
  /** Positions of syntax errors (empty when the expression parses). */
  errors: number[];
  /** Label names in every `by (...)` / `on (...)` / `ignoring (...)` clause. */
  groupingLabels: string[];
}

/**
 * Grafana's `$__rate_interval`, `$__interval` and `$__range` are not PromQL: Grafana substitutes a duration
 * before the query leaves, and so does this (with 5m). `$var` inside label strings is left alone: a string.
 */
export function substituteGrafanaVariables(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m');
}

export function parsePromQL(expr: string): ParsedQuery {
  const tree = parser.parse(expr);
  const selectors: Selector[] = [];
  const errors: number[] = [];
  const groupingLabels: string[] = [];
  const text = (node: { from: number; to: number }) => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) errors.push(ref.from);
      if (ref.name === 'GroupingLabels') {
        for (let c = ref.node.firstChild; c; c = c.nextSibling)
          if (c.name === 'LabelName') groupingLabels.push(text(c));
      }
      if (ref.name !== 'VectorSelector') return;
      const node = ref.node;
      const id = node.getChild('Identifier');
      if (!id) return;
      const matchers: string[] = [];
      const list = node.getChild('LabelMatchers');
      for (let m = list?.firstChild; m; m = m.nextSibling) {
        const label = m.getChild('LabelName');
        if (label) matchers.push(text(label));
      }
      let inHistogramQuantile = false;
      const groupingsToQuantile: string[][] = [];
      for (let up = node.parent; up && !inHistogramQuantile; up = up.parent) {
        if (up.name === 'AggregateExpr') {
          const labels: string[] = [];
          const grouping = up.getChild('AggregateModifier')?.getChild('GroupingLabels');
          for (let c = grouping?.firstChild; c; c = c.nextSibling) if (c.name === 'LabelName') labels.push(text(c));
          groupingsToQuantile.push(labels);
        }
        if (up.name === 'FunctionCall' && up.getChild('FunctionIdentifier')?.getChild('HistogramQuantile')) {
          inHistogramQuantile = true;
        }
      }
      selectors.push({ metric: text(id), matchers, inHistogramQuantile, groupingsToQuantile });
    },
  });
  return { selectors, errors, groupingLabels };
}
