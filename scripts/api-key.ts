/**
 * @module scripts/api-key — makes an API key for the DeepL and LibreTranslate APIs: prints the key (give it to its
 * user; it is not kept anywhere) and the entry to add to the API_KEYS file or folder (only its hash).
 *
 *     node --import tsx scripts/api-key.ts <id> [--requests-per-second N] [--characters-per-period N]
 *                                               [--period-s N] [--character-quota N]
 *                                               [--max-documents N] [--max-glossaries N] [--admin]
 *
 * `--admin` makes a key that may read every key's use (`GET /metrics`, the status page's key table).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { hashKey } from '../router/keys/key-ring.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'requests-per-second': { type: 'string' },
    'characters-per-period': { type: 'string' },
    'period-s': { type: 'string' },
    'character-quota': { type: 'string' },
    'max-documents': { type: 'string' },
    'max-glossaries': { type: 'string' },
    admin: { type: 'boolean' },
  },
});
const id = positionals[0];
if (id === undefined) {
  process.stderr.write('usage: scripts/api-key.ts <id> [--requests-per-second N] [--characters-per-period N] …\n');
  process.exit(2);
}
const key = randomBytes(24).toString('base64url');
const entry: Record<string, string | number | boolean> = { id, sha256: hashKey(key) };
for (const [option, value] of Object.entries(values))
  if (value !== undefined) entry[option.replaceAll('-', '_')] = typeof value === 'boolean' ? value : Number(value);
process.stdout.write(`key: ${key}\nentry: ${JSON.stringify(entry)}\n`);
