/**
 * @module router/keys/key-metrics — each API key's use, by key id, where operators look: Prometheus text for the
 * router's `GET /metrics` and an `apiKeys` list in `/status.json` (the status page's table). The figures come from
 * the shared usage store, so every router instance answers the same cluster-wide totals.
 */
import type { KeyReport } from './api-access.js';

const label = (id: string) => id.replace(/[\\"]/g, (c) => `\\${c}`);

/** The Prometheus exposition of `reports`. */
export function keyMetricsText(reports: readonly KeyReport[]): string {
  const families: [string, string, string, (r: KeyReport) => number | null][] = [
    ['mt_api_key_requests_total', 'counter', 'Requests admitted for the API key.', (r) => r.requests],
    ['mt_api_key_characters_total', 'counter', 'Characters admitted for the API key.', (r) => r.characters],
    ['mt_api_key_character_quota', 'gauge', "The API key's character quota.", (r) => r.characterQuota],
  ];
  const lines: string[] = [];
  for (const [name, type, help, value] of families) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const report of reports) {
      const v = value(report);
      if (v !== null) lines.push(`${name}{key_id="${label(report.id)}"} ${v}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** The model server's status document with the keys' use added as `apiKeys`. */
export function statusWithKeys(status: Uint8Array, reports: readonly KeyReport[]): string {
  const document = JSON.parse(Buffer.from(status).toString('utf8')) as Record<string, unknown>;
  return JSON.stringify({ ...document, apiKeys: reports });
}
