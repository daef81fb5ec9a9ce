/**
 * @module model-server/http/token-auth — TorchServe's token authorization keys: generated at start into the
 * key file (`KEY_FILE`, mode 0600), presented as `Authorization: Bearer <key>`. The inference key opens the
 * inference API, the management key the management API; the metrics API stays open (bind it to loopback).
 * Unlike TorchServe, keys do not expire while the server runs; restart to rotate them.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface ApiKeys {
  inference: string;
  management: string;
  /** TorchServe's third key (for its token API); written for compatibility, not used by our APIs. */
  api: string;
}

/** Generate fresh keys and write them in TorchServe's key_file.json layout. */
export function writeKeyFile(file: string): ApiKeys {
  const key = () => randomBytes(24).toString('base64url');
  const keys: ApiKeys = { inference: key(), management: key(), api: key() };
  const created = new Date().toISOString();
  const body = {
    management: { key: keys.management, 'expiration time': 'never', created },
    inference: { key: keys.inference, 'expiration time': 'never', created },
    API: { key: keys.api },
  };
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  return keys;
}
