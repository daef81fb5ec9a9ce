/**
 * @module router/upstream/hosts/probe — asking a host something on its own control connection, never behind translations in
 * a lane: one GET given up only after the host's silence, `/ping`, and the error of a host that went silent.
 *
 * A busy host is not a dead one (Envoy's outlier detection and nginx's max_fails judge a host by its answers, not by
 * one probe): any HTTP answer from the host — a translation, a 503 refusal, a probe — is heard (`heardAt`), and a
 * probe's deadline is `probeTimeoutMs` of *silence* since it was sent, not of its own wait: a host whose `/ping`
 * waits seconds behind ten thousand clients (bench figure 11) while it keeps answering requests stays in, and so
 * do the requests it holds.
 */
import { Client } from 'undici';
import type { Logger } from '../../../common/logger.js';
import type { HostState } from './host.js';

/** What control GETs are timed, authorized and logged by (router/upstream/model-servers.ts's options say what each is). */
export interface ControlOptions {
  probeTimeoutMs: number;
  authorization?: ((refresh: boolean) => string | undefined) | undefined;
  logger?: Pick<Logger, 'info' | 'warn'> | undefined;
}

/** GETs in flight at once on a control connection: a language read sends one per language. */
const CONTROL_PIPELINING = 32;

/**
 * A host's own connection for probes and language reads, never shared with translations. Pipelined: a read of
 * every language is one round trip, not one per language, so a distant host's reads fit the probe limit.
 */
export function controlClient(origin: string, probeTimeoutMs: number): Client {
  return new Client(origin, { connect: { timeout: probeTimeoutMs }, pipelining: CONTROL_PIPELINING });
}

/**
 * One GET on the host's control connection, given up only when the host has been silent for `probeTimeoutMs` since
 * it was sent: while traffic is answered the deadline moves on to `probeTimeoutMs` after the last answer. `auth`
 * sends the key (`refreshKey`: read afresh). @throws SilentHostError when given up; the transport's error when the
 * connection fails.
 */
export async function controlGet(
  host: HostState,
  path: string,
  options: ControlOptions,
  auth: boolean,
  refreshKey = false,
): Promise<number> {
  const { probeTimeoutMs, logger } = options;
  const headers: Record<string, string> = {};
  const authorization = auth ? options.authorization?.(refreshKey) : undefined;
  if (authorization !== undefined) headers.authorization = authorization;
  const sentAt = performance.now();
  const controller = new AbortController();
  let done = false;
  let timer: NodeJS.Timeout | undefined;
  const watch = (delayMs: number) => {
    // Judged after the event loop's I/O phase (setImmediate runs after it): when this process was itself too
    // busy to run the timer on time, answers that arrived meanwhile are read before silence is concluded.
    timer = setTimeout(() => setImmediate(judge), delayMs);
  };
  const judge = () => {
    if (done) return;
    const silentMs = performance.now() - Math.max(host.heardAt, sentAt);
    if (silentMs >= probeTimeoutMs) {
      controller.abort(new SilentHostError(path, silentMs));
      return;
    }
    if (!host.busy) {
      host.busy = true;
      logger?.warn(
        { modelServer: host.origin, path, waitedMs: Math.round(performance.now() - sentAt) },
        'model server slow to answer its probe while it answers requests: busy, kept in',
      );
    }
    watch(probeTimeoutMs - silentMs);
  };
  watch(probeTimeoutMs);
  try {
    const response = await host.control.request({ method: 'GET', path, headers, signal: controller.signal });
    await response.body.dump();
    host.heardAt = performance.now();
    if (host.busy && host.heardAt - sentAt < probeTimeoutMs) {
      host.busy = false;
      logger?.info({ modelServer: host.origin }, 'model server answers its probe promptly again');
    }
    return response.statusCode;
  } finally {
    done = true;
    clearTimeout(timer);
  }
}

/** `GET /ping` on `client`, answered within `timeoutMs`: its status. @throws the transport's error or the timeout */
export async function pingStatus(client: Client, timeoutMs: number): Promise<number> {
  const response = await client.request({
    method: 'GET',
    path: '/ping',
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  await response.body.dump();
  return response.statusCode;
}

/** A host said nothing at all — to the probe or to any request — for the probe limit since the probe was sent. */
export class SilentHostError extends Error {
  readonly silentMs: number;
  constructor(path: string, silentMs: number) {
    super(`nothing heard from it for ${Math.round(silentMs)} ms (${path} unanswered)`);
    this.name = 'SilentHostError';
    this.silentMs = silentMs;
  }
}

/** undici's and Node's codes for a failed exchange (as opposed to an unexpected answer). */
export function isTransportCode(code: unknown): boolean {
  return typeof code === 'string' && (code.startsWith('UND_ERR_') || code.startsWith('E'));
}
