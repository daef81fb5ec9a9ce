/**
 * @module router/keys/file-usage-store — key usage on one machine with no extra service: one JSON file
 * (`usage.json` in USAGE_STORE's folder) that every router instance reads, decides on and rewrites in turn, holding
 * a lock file (`usage.lock`, created exclusively) meanwhile. pm2's cluster instances are separate processes that
 * share nothing else; the file is the one place they all consult, so a limit holds for the whole cluster, not per
 * instance, and counts survive a restart.
 *
 * ```
 * instance A: open(lock, wx) ─ read usage.json ─ decide ─ write tmp, rename ─ unlink(lock)
 * instance B:        open(lock, wx) → EEXIST, wait 1–4 ms, again ─────────────── open(lock, wx) ─ …
 * ```
 * The rename makes every write whole: a reader sees the old file or the new one. A lock left by an instance that
 * died holding it (older than `STALE_LOCK_MS`, far longer than any holder keeps it) is removed by the next comer.
 */
import { mkdirSync } from 'node:fs';
import { open, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Admission, ApiKey, KeyUsage } from './api-access.js';
import { decide, EMPTY_STATE, type KeyState, type UsageStore } from './usage-store.js';

/** A lock older than this was left by a holder that died. */
const STALE_LOCK_MS = 5_000;
/** The longest wait for the lock before giving up, ms. */
const LOCK_TIMEOUT_MS = 10_000;

type UsageFile = Record<string, KeyState>;

export class FileUsageStore implements UsageStore {
  readonly #file: string;
  readonly #lock: string;
  /** This process's own turns, one at a time, so its requests do not contend with each other for the lock. */
  #turn: Promise<unknown> = Promise.resolve();

  constructor(dir: string) {
    mkdirSync(dir, { recursive: true });
    this.#file = path.join(dir, 'usage.json');
    this.#lock = path.join(dir, 'usage.lock');
  }

  admit(key: ApiKey, characters: number, nowMs: number): Promise<Admission> {
    return this.#locked(async () => {
      const usage = await this.#read();
      const { admission, state } = decide(usage[key.id] ?? EMPTY_STATE, key, characters, nowMs);
      if (admission.ok) {
        usage[key.id] = state;
        const tmp = `${this.#file}.${process.pid}.tmp`;
        await writeFile(tmp, JSON.stringify(usage));
        await rename(tmp, this.#file);
      }
      return admission;
    });
  }

  async usage(keyId: string): Promise<KeyUsage> {
    const state = (await this.#read())[keyId] ?? EMPTY_STATE;
    return { characters: state.characters, requests: state.requests };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  async #read(): Promise<UsageFile> {
    try {
      return JSON.parse(await readFile(this.#file, 'utf8')) as UsageFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw err;
    }
  }

  #locked<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#turn.then(async () => {
      await this.#acquire();
      try {
        return await run();
      } finally {
        await unlink(this.#lock).catch(() => {});
      }
    });
    this.#turn = next.catch(() => {});
    return next;
  }

  async #acquire(): Promise<void> {
    const deadline = Date.now() + LOCK_TIMEOUT_MS;
    for (;;) {
      try {
        const handle = await open(this.#lock, 'wx');
        await handle.close();
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const held = await stat(this.#lock).catch(() => undefined);
      if (held !== undefined && Date.now() - held.mtimeMs > STALE_LOCK_MS) {
        await unlink(this.#lock).catch(() => {});
        continue;
      }
      if (Date.now() > deadline) throw new Error(`usage store: ${this.#lock} held for over ${LOCK_TIMEOUT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 3));
    }
  }
}
