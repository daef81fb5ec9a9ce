import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS } from '../../common/errors.js';

const doc = readFileSync(path.resolve(import.meta.dirname, '../../docs/model-server.md'), 'utf8');

describe('docs/model-server.md', () => {
  it('its error-code table is the catalogue, row for row', () => {
    const section = doc.slice(doc.indexOf('## Error codes'));
    const rows = [...section.matchAll(/^\| ([A-Z_]+) \| (\d{3}) \| (\w+) \| (.+) \|$/gm)].map((m) => ({
      code: m[1],
      status: Number(m[2]),
      type: m[3],
      message: m[4],
    }));
    const catalogue = Object.entries(ERRORS).map(([code, e]) => ({
      code,
      status: e.status,
      type: e.type,
      message: e.message,
    }));
    expect(rows).toEqual(catalogue);
  });

  it('documents every registration parameter and metric family the server has', () => {
    for (const param of [
      'url',
      'model_name',
      'handler',
      'runtime',
      'batch_size',
      'max_batch_delay',
      'initial_workers',
      'synchronous',
      'response_timeout',
      'startup_timeout',
      'min_worker',
      'max_worker',
    ]) {
      expect(doc).toContain(`\`${param}\``);
    }
    const metricsSource = readFileSync(path.resolve(import.meta.dirname, '../wlm/metrics.ts'), 'utf8');
    for (const [, name] of metricsSource.matchAll(/name: '([a-z_]+)'/g)) expect(doc).toContain(`\`${name}\``);
  });
});
