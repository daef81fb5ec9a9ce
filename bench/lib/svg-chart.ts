/**
 * @module bench/lib/svg-chart — a small line chart as standalone SVG, for figures the Markdown report links to
 * (GitHub and browsers render SVG images inline). No dependency: a report must be writable offline and diffable.
 */

export interface Series {
  name: string;
  /** [x, y] points; non-finite y values are left out (a level that was not measured). */
  points: [number, number][];
}

export interface ChartPanel {
  title: string;
  yLabel: string;
  series: Series[];
  /** A horizontal reference line (e.g. a target), with its label. */
  reference?: { y: number; label: string };
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  /** One or more panels stacked vertically, sharing the x axis. */
  panels: ChartPanel[];
}

const WIDTH = 720;
const PANEL_HEIGHT = 260;
const MARGIN = { left: 70, right: 170, top: 40, bottom: 50 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

/** Escape text for SVG content and attributes. */
function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** About five round ticks covering [0, max]. */
export function niceTicks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough)!;
  const ticks: number[] = [];
  for (let t = 0; t <= max + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  if (ticks[ticks.length - 1]! < max) ticks.push(Number((ticks[ticks.length - 1]! + step).toPrecision(12)));
  return ticks;
}

function label(value: number): string {
  return Math.abs(value) >= 1000 ? `${value / 1000}k` : String(value);
}

/** Render the chart; x and y axes start at 0. */
export function lineChart(options: ChartOptions): string {
  const height = MARGIN.top + options.panels.length * PANEL_HEIGHT + MARGIN.bottom;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PANEL_HEIGHT - 50;
  const xs = options.panels.flatMap((p) => p.series.flatMap((s) => s.points.map(([x]) => x)));
  const xTicks = niceTicks(Math.max(1, ...xs));
  const xMax = xTicks[xTicks.length - 1]!;
  const sx = (x: number) => MARGIN.left + (x / xMax) * plotW;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(options.title)}</text>`,
  ];
  options.panels.forEach((panel, index) => {
    const top = MARGIN.top + index * PANEL_HEIGHT + 20;
    const bottom = top + plotH;
    const ys = panel.series.flatMap((s) => s.points.map(([, y]) => y)).filter(Number.isFinite);
    const yTicks = niceTicks(Math.max(panel.reference?.y ?? 0, ...ys, 0));
    const yMax = yTicks[yTicks.length - 1]!;
    const sy = (y: number) => bottom - (y / yMax) * plotH;
    out.push(`<text x="${MARGIN.left}" y="${top - 8}" font-weight="bold">${esc(panel.title)}</text>`);
    for (const t of yTicks) {
      out.push(
        `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`,
        `<text x="${MARGIN.left - 6}" y="${sy(t) + 4}" text-anchor="end">${label(t)}</text>`,
      );
    }
    for (const t of xTicks) {
      out.push(
        `<line x1="${sx(t)}" x2="${sx(t)}" y1="${bottom}" y2="${bottom + 4}" stroke="#333"/>`,
        `<text x="${sx(t)}" y="${bottom + 17}" text-anchor="middle">${label(t)}</text>`,
      );
    }
    out.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${bottom}" y2="${bottom}" stroke="#333"/>`,
      `<line x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${top}" y2="${bottom}" stroke="#333"/>`,
      `<text transform="translate(16 ${(top + bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(panel.yLabel)}</text>`,
    );
    if (panel.reference) {
      const y = sy(panel.reference.y);
      out.push(
        `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${y}" y2="${y}" stroke="#888" stroke-dasharray="5 4"/>`,
        `<text x="${MARGIN.left + plotW + 6}" y="${y + 4}" fill="#555">${esc(panel.reference.label)}</text>`,
      );
    }
    panel.series.forEach((series, k) => {
      const colour = COLOURS[k % COLOURS.length]!;
      const points = series.points.filter(([, y]) => Number.isFinite(y));
      if (points.length > 0) {
        const d = points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${sx(x).toFixed(1)} ${sy(y).toFixed(1)}`).join(' ');
        out.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="2"/>`);
        for (const [x, y] of points)
          out.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="3.5" fill="${colour}"/>`);
      }
      const ly = top + 14 + k * 18;
      out.push(
        `<line x1="${MARGIN.left + plotW + 10}" x2="${MARGIN.left + plotW + 30}" y1="${ly}" y2="${ly}" stroke="${colour}" stroke-width="2"/>`,
        `<text x="${MARGIN.left + plotW + 36}" y="${ly + 4}">${esc(series.name)}</text>`,
      );
    });
  });
  out.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${esc(options.xLabel)}</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
