/** @module router/upstream/hosts/route — where a request for one language may go, from the hosts' current view. */
import type { HostState } from './host.js';

/** Where a request for one language may go (router/upstream/upstream.ts picks among `origins`). */
export type Route =
  /** Healthy hosts where the language is ready (else where its worker is restarting: `readySinceAdmitted`). */
  | { kind: 'hosts'; origins: readonly string[] }
  /** No host has answered since the router started: every known host, tried anyway (a refusal is a fast 502). */
  | { kind: 'unreachable'; origins: readonly string[] }
  /**
   * No answering host has the language ready (those that serve it are down or still loading it, or it is not
   * registered anywhere yet): 503 + Retry-After at once. `reason` says which, without addresses.
   */
  | { kind: 'language-down'; reason: string }
  /** MODEL_SERVERS resolved to no address. */
  | { kind: 'none' };

/**
 * Where a request for `lang` may go among `hosts`. Only hosts that report `lang` ready take it: a host back from a
 * restart with some of its models still loading (or none registered yet) gets only the languages it reports ready,
 * and a language no answering host has ready is refused at once, as unavailable for now, never sent where it would
 * be answered 404. The one exception: when no host has it ready, a host that had it ready since it was admitted and
 * still has it registered (its worker is restarting) takes it, and its queue holds the requests until the worker is
 * back.
 */
export function routeOf(hosts: ReadonlyMap<string, HostState>, lang: string): Route {
  if (hosts.size === 0) return { kind: 'none' };
  const ready: string[] = [];
  const restarting: string[] = [];
  let healthy = 0;
  let down = 0;
  let loading = 0;
  let without = 0;
  for (const host of hosts.values()) {
    if (host.health === 'healthy') {
      healthy++;
      if (host.ready.has(lang)) {
        ready.push(host.origin);
        continue;
      }
      if (host.registered.has(lang) && host.readySinceAdmitted.has(lang)) restarting.push(host.origin);
      else if (host.registered.has(lang)) loading++;
      else without++;
    } else if (host.health === 'ejected' && host.registered.has(lang)) {
      down++;
    }
  }
  if (ready.length > 0) return { kind: 'hosts', origins: ready };
  // Its worker is restarting there (a crash, a scale): the model server holds the requests in its queue, and its
  // queue budget answers 503 itself when the wait would be too long.
  if (restarting.length > 0) return { kind: 'hosts', origins: restarting };
  // No host has ever been heard from (all down since this router started): try one, a refusal is a fast 502.
  if (healthy === 0 && down === 0) return { kind: 'unreachable', origins: [...hosts.keys()] };
  const counts = [
    down > 0 ? `${down} down` : '',
    loading > 0 ? `${loading} still loading it` : '',
    without > 0 ? `${without} answering without it` : '',
  ].filter(Boolean);
  return { kind: 'language-down', reason: `no model server has it ready: ${counts.join(', ')}` };
}
