/**
 * The documentation's promises that code can check: the configuration reference (docs/configuration.md) lists
 * every variable the loader knows, with the loader's default, and the README's quick start is the two commands CI
 * relies on.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ENV_DEFAULTS, type EnvName } from '../../common/config.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const configuration = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** Rows of the configuration reference's table: `| \`NAME\` | \`default\` | … |`. */
function configTable(): Map<string, string> {
  const section = configuration.split('## Variables')[1]?.split('\n## ')[0] ?? '';
  const rows = new Map<string, string>();
  for (const match of section.matchAll(/^\| `([A-Z_]+)` \| `([^`]*)` \|/gm)) rows.set(match[1]!, match[2]!);
  return rows;
}

describe('README and docs/configuration.md', () => {
  it('documents every configuration variable with its real default', () => {
    const table = configTable();
    const expected = Object.fromEntries(Object.entries(ENV_DEFAULTS).map(([name, value]) => [name, value]));
    expect(Object.fromEntries(table)).toEqual(expected);
    for (const name of Object.keys(ENV_DEFAULTS) as EnvName[]) expect(table.get(name)).toBe(ENV_DEFAULTS[name]);
  });

  it('shows the two quick-start commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });

  it('has no unfilled section', () => {
    expect(readme).not.toMatch(/PLACEHOLDER|TODO|TBD/);
  });
});
