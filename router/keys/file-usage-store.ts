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
import type { Admission, ApiKey, Charge, KeyUsage } from './api-access.js';
import { decide, EMPTY_STATE, type KeyState, refunded, type UsageStore } from './usage-store.js';

/** A lock older than this was left by a holder that died. */
const STALE_LOCK_MS = 5_000;
/** The longest wait for the lock before giving up, ms. */
const LOCK_TIMEOUT_MS = 10_000;

/**
 * `usage.json` by key id. A Map, never a plain object: a key id is any name the key file allows, `__proto__` included,
 * and a plain object would take that one as its prototype instead of counting it.
 */
type Usage = Map<string, KeyState>;

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

  admit(key: ApiKey, characters: number | null, nowMs: number): Promise<Admission> {
    return this.#locked(async () => {
      const usage = await this.#read();
      const { admission, state } = decide(usage.get(key.id) ?? EMPTY_STATE, key, characters, nowMs);
      if (admission.ok) {
        usage.set(key.id, state);
        await this.#write(usage);
      }
      return admission;
    });
  }

  refund(key: ApiKey, charge: Charge): Promise<void> {
    return this.#locked(async () => {
      const usage = await this.#read();
      const state = usage.get(key.id);
      if (state === undefined) return;
      usage.set(key.id, refunded(state, charge));
      await this.#write(usage);
    });
  }

  async usages(keyIds: readonly string[]): Promise<Map<string, KeyUsage>> {
    const usage = await this.#read();
    return new Map(
      keyIds.map((id) => {
        const state = usage.get(id) ?? EMPTY_STATE;
        return [id, { characters: state.characters, requests: state.requests }];
      }),
    );
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  async #read(): Promise<Usage> {
    let text: string;
    try {
      text = await readFile(this.#file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw err;
    }
    // JSON.parse defines `__proto__` as an own property, which Object.entries lists like any other id.
    return new Map(Object.entries(JSON.parse(text) as Record<string, KeyState>));
  }

  async #write(usage: Usage): Promise<void> {
    const tmp = `${this.#file}.${process.pid}.tmp`;
    // Object.fromEntries defines each id as an own property, `__proto__` too, and JSON.stringify writes them all.
    await writeFile(tmp, JSON.stringify(Object.fromEntries(usage)));
    await rename(tmp, this.#file);
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
