/**
 * @module router/upstream/hosts/languages — which languages a host serves, asked of the host itself on its inference port,
 * the one port a model server exposes to other machines (management stays on loopback): `GET
 * /v2/models/{lang}/ready` for each language the router accepts — 200 ready, 400 registered but not ready (loading,
 * scaled to 0), 404 not registered. No map is kept by hand, and a language registered or unregistered on a host is
 * seen at the next read.
 */
import type { HostState } from './host.js';
import { controlGet, type ControlOptions } from './probe.js';

/** `recheck` asks one host about one language at most this often, ms. */
const RECHECK_INTERVAL_MS = 100;

const readyPath = (lang: string) => `/v2/models/${encodeURIComponent(lang)}/ready`;

/** Read every one of `languages` on `host`. @throws on any answer but 200, 400, 404, and as `controlGet` does */
export async function readLanguages(host: HostState, languages: readonly string[], options: ControlOptions) {
  const ready = new Set<string>();
  const registered = new Set<string>();
  await Promise.all(
    languages.map(async (lang) => {
      let status = await controlGet(host, readyPath(lang), options, true);
      // The model server writes new keys at each start: read the key file again, once.
      if (status === 401 && options.authorization)
        status = await controlGet(host, readyPath(lang), options, true, true);
      if (status === 200) ready.add(lang);
      if (status === 200 || status === 400) registered.add(lang);
      else if (status !== 404) throw new Error(`/v2/models/${lang}/ready answered ${status}`);
    }),
  );
  host.ready = ready;
  host.registered = registered;
  if (host.health === 'healthy') for (const lang of ready) host.readySinceAdmitted.add(lang);
}

/**
 * Ask each healthy host that does not list `lang` ready about it now (one GET), so a language registered or loaded
 * since the last read is routed on its first request, not at the next period. One question per host and language
 * at a time, at most every `RECHECK_INTERVAL_MS`; a failed one changes nothing (the probes judge health). Resolves
 * when the answers are in.
 */
export async function recheck(hosts: Iterable<HostState>, lang: string, options: ControlOptions): Promise<void> {
  const asked: Promise<void>[] = [];
  for (const host of hosts) {
    if (host.health !== 'healthy' || host.ready.has(lang)) continue;
    const last = host.rechecks.get(lang);
    if (last instanceof Promise) {
      asked.push(last);
      continue;
    }
    if (last !== undefined && performance.now() - last < RECHECK_INTERVAL_MS) continue;
    const sentAt = performance.now();
    const check = controlGet(host, readyPath(lang), options, true)
      .then((status) => {
        if (host.health !== 'healthy') return;
        if (status === 200) {
          host.ready.add(lang);
          host.readySinceAdmitted.add(lang);
        }
        if (status === 200 || status === 400) host.registered.add(lang);
      })
      .catch(() => undefined)
      .finally(() => host.rechecks.set(lang, sentAt));
    host.rechecks.set(lang, check);
    asked.push(check);
  }
  await Promise.all(asked);
}
