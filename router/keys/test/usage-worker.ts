/**
 * @module router/keys/test/usage-worker — one router instance's share of a usage-store race, in its own process:
 * `usage-worker.ts <store> <tries> <characters>` asks the store (a folder, or a redis:// URL) to admit `tries`
 * requests of `characters` for the key `race` (character quota from RACE_QUOTA), and prints how many it admitted.
 */
import { FileUsageStore } from '../file-usage-store.js';
import { RedisUsageStore } from '../redis-usage-store.js';

const [store, tries, characters] = process.argv.slice(2) as [string, string, string];
const usage = store.startsWith('redis://') ? new RedisUsageStore(store) : new FileUsageStore(store);
const key = { id: 'race', periodS: 60, characterQuota: Number(process.env.RACE_QUOTA) };
let admitted = 0;
await Promise.all(
  Array.from({ length: Number(tries) }, async () => {
    if ((await usage.admit(key, Number(characters), Date.now())).ok) admitted++;
  }),
);
await usage.close();
process.stdout.write(`${admitted}\n`);
