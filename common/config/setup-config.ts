/** @module common/config/setup-config — the seed's setup_config.json: which languages are served, on which device. */
import { z } from 'zod';
import { readJsonFile } from '../atomic-file.js';
import { ConfigError } from './variables.js';

/** The seed's setup_config.json: language → device id string ("0", "1", …). */
export interface SetupConfig {
  cuda_id: Record<string, string>;
}

/** Read and validate setup_config.json; errors name the file and the bad entry. */
export function readSetupConfig(file: string): SetupConfig {
  const json = readJsonFile(file);
  if (!json.ok) throw new ConfigError([`SETUP_CONFIG=${file}: cannot read JSON (${json.error})`]);
  const schema = z.object({
    cuda_id: z.record(
      z.string().regex(/^[a-z]{2,3}$/, 'language codes are 2–3 lowercase letters'),
      z.string().regex(/^\d+$/, 'device ids are digit strings'),
    ),
  });
  const parsed = schema.safeParse(json.value);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `SETUP_CONFIG=${file}: ${i.path.join('.')}: ${i.message}`));
  }
  if (Object.keys(parsed.data.cuda_id).length === 0) {
    throw new ConfigError([`SETUP_CONFIG=${file}: cuda_id lists no language`]);
  }
  return parsed.data;
}
