/**
 * @module common/config/setup-config — setup_config.json: which languages are served, by which model, on which
 * device. The seed's `cuda_id` (target → device) is served by the default model (MODEL_DIR) from any source;
 * `pairs` (optional) gives a pair a model of its own (a Marian opus-mt export), served from its own store entry
 * named after the pair (`en-de`). A request goes to its pair's entry when there is one, else to its target's.
 */
import { z } from 'zod';
import { readJsonFile } from '../atomic-file.js';
import { ConfigError } from './variables.js';

/** The seed's setup_config.json: language → device id string ("0", "1", …), and the pairs with a model of their own. */
export interface SetupConfig {
  cuda_id: Record<string, string>;
  /** `"en-de"` → the folder of the model serving en→de, and its device id. */
  pairs?: Record<string, { model_dir: string; cuda_id: string }>;
}

/** A pair's entry name: source and target codes joined by `-`. */
export const PAIR_ENTRY = /^([a-z]{2,3})-([a-z]{2,3})$/;

/** The target language of a store entry: `de` for `de` and for `en-de`. */
export function targetOf(entry: string): string {
  return PAIR_ENTRY.exec(entry)?.[2] ?? entry;
}

/** The pair a store entry serves, as the status page shows it: `en → de` for `en-de`, `any → de` for `de`. */
export function servedPair(entry: string): string {
  const pair = PAIR_ENTRY.exec(entry);
  return pair ? `${pair[1]} → ${pair[2]}` : `any → ${entry}`;
}

/** Every store entry setup_config.json names: its targets, then its pairs. */
export function entriesOf(setup: SetupConfig): string[] {
  return [...Object.keys(setup.cuda_id), ...Object.keys(setup.pairs ?? {})];
}

/** Every target language served, by the default model or by a pair's. */
export function targetsOf(setup: SetupConfig): string[] {
  return [...new Set(entriesOf(setup).map(targetOf))];
}

/** The device id an entry is pinned to (undefined: not named, so the CPU). */
export function deviceOf(setup: SetupConfig | undefined, entry: string): string | undefined {
  return setup?.cuda_id[entry] ?? setup?.pairs?.[entry]?.cuda_id;
}

/**
 * The store entry serving `src` → `tgt`: the pair's own model when it has one, else the target's, which reads any
 * source (`auto` included: its model detects). Undefined when neither is served.
 */
export function entryFor(setup: SetupConfig, src: string, tgt: string): string | undefined {
  const pair = `${src}-${tgt}`;
  if (setup.pairs?.[pair] !== undefined) return pair;
  return Object.hasOwn(setup.cuda_id, tgt) ? tgt : undefined;
}

/** What is served, for messages: `any → ko, …, en → de`. */
export function servedPairs(setup: SetupConfig): string {
  return entriesOf(setup).map(servedPair).join(', ');
}

/** Read and validate setup_config.json; errors name the file and the bad entry. */
export function readSetupConfig(file: string): SetupConfig {
  const json = readJsonFile(file);
  if (!json.ok) throw new ConfigError([`SETUP_CONFIG=${file}: cannot read JSON (${json.error})`]);
  const device = z.string().regex(/^\d+$/, 'device ids are digit strings');
  const schema = z.object({
    cuda_id: z.record(z.string().regex(/^[a-z]{2,3}$/, 'language codes are 2–3 lowercase letters'), device),
    pairs: z
      .record(
        z.string(),
        z.strictObject({ model_dir: z.string().min(1, 'model_dir names the model folder'), cuda_id: device }),
      )
      .optional(),
  });
  const parsed = schema.safeParse(json.value);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `SETUP_CONFIG=${file}: ${i.path.join('.')}: ${i.message}`));
  }
  // Checked here rather than in the schema, whose message for a bad record key does not say what a key must be.
  const badPairs = Object.keys(parsed.data.pairs ?? {}).filter((pair) => !PAIR_ENTRY.test(pair));
  if (badPairs.length > 0) {
    throw new ConfigError(
      badPairs.map((pair) => `SETUP_CONFIG=${file}: pairs.${pair}: pairs are source-target codes such as "en-de"`),
    );
  }
  if (Object.keys(parsed.data.cuda_id).length === 0) {
    throw new ConfigError([`SETUP_CONFIG=${file}: cuda_id lists no language`]);
  }
  return parsed.data;
}
