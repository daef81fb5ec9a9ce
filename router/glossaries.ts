/**
 * @module router/glossaries — the router's view of the glossaries its model servers keep (model-server
 * glossary-store.ts), for DeepL's glossary API and for `glossary_id` on a translation.
 *
 * A new glossary gets one id and is written to every model server the router knows (`PUT /glossaries/{id}`), so
 * each of them lists it; a model server that was away at the time lacks it, so reads ask every host and take the
 * first that has it. A translation naming a glossary is sent with its entries inline: whichever host serves the
 * language then applies it, whether it holds the glossary or not. Glossaries never change once made (as DeepL's),
 * so their entries are kept here for a few seconds; a deleted glossary may still apply for that long.
 *
 * With API keys on, each glossary belongs to the key that made it (`x-glossary-owner`, the key's id): another key
 * neither sees nor uses it.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { ERROR_CODE_HEADER, ServeError } from '../common/errors.js';
import { header } from './upstream/reply.js';

/** The model servers to ask (router/upstream/upstream.ts `Upstream`). */
export interface GlossaryHosts {
  origins(): string[];
  authorizationHeader(): string | undefined;
}

/** A glossary as DeepL describes one (the model server answers in this shape). */
export interface GlossaryInfo {
  glossary_id: string;
  name: string;
  ready: boolean;
  source_lang: string;
  target_lang: string;
  creation_time: string;
  entry_count: number;
}

export interface GlossaryFields {
  name: string;
  source_lang: string;
  target_lang: string;
  /** TSV or CSV, as `entries_format` says. */
  entries: string;
  entries_format: 'tsv' | 'csv';
}

/** A glossary with its entries, ready to send inline. */
export interface ResolvedGlossary {
  info: GlossaryInfo;
  entries: Record<string, string>;
}

const KEEP_MS = 5_000;
const MAX_KEPT = 256;

export class GlossaryClient {
  readonly #upstream: GlossaryHosts;
  readonly #timeoutMs: number;
  readonly #kept = new Map<string, { at: number; glossary: ResolvedGlossary }>();

  constructor(upstream: GlossaryHosts, timeoutMs: number) {
    this.#upstream = upstream;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Make a glossary on every model server. @throws ServeError with the model server's 4xx (bad entries), or
   * UPSTREAM_UNAVAILABLE when none took it.
   */
  async create(fields: GlossaryFields, owner: string | undefined): Promise<GlossaryInfo> {
    const id = randomUUID();
    const answers = await this.#everyHost('PUT', `/glossaries/${id}`, owner, JSON.stringify(fields));
    const made = answers.find((a) => a.status === 201);
    if (made) return JSON.parse(made.body) as GlossaryInfo;
    throw errorOf(answers);
  }

  /** Every glossary the owner may see, each once, oldest first. */
  async list(owner: string | undefined): Promise<GlossaryInfo[]> {
    const answers = await this.#everyHost('GET', '/glossaries', owner);
    const byId = new Map<string, GlossaryInfo>();
    for (const answer of answers.filter((a) => a.status === 200)) {
      for (const info of (JSON.parse(answer.body) as { glossaries: GlossaryInfo[] }).glossaries) {
        if (!byId.has(info.glossary_id)) byId.set(info.glossary_id, info);
      }
    }
    if (byId.size === 0 && !answers.some((a) => a.status === 200)) throw errorOf(answers);
    return [...byId.values()].sort((a, b) => a.creation_time.localeCompare(b.creation_time));
  }

  /** The glossary's description, or undefined when no model server has it for this owner. */
  async info(id: string, owner: string | undefined): Promise<GlossaryInfo | undefined> {
    const body = await this.#first(`/glossaries/${encodeURIComponent(id)}`, owner);
    return body === undefined ? undefined : (JSON.parse(body) as GlossaryInfo);
  }

  /** The glossary's entries as TSV, or undefined when no model server has it for this owner. */
  entries(id: string, owner: string | undefined): Promise<string | undefined> {
    return this.#first(`/glossaries/${encodeURIComponent(id)}/entries`, owner);
  }

  /** Delete it everywhere; false when no model server had it. */
  async delete(id: string, owner: string | undefined): Promise<boolean> {
    this.#kept.delete(`${owner ?? ''}\u0000${id}`);
    const answers = await this.#everyHost('DELETE', `/glossaries/${encodeURIComponent(id)}`, owner);
    if (answers.some((a) => a.status === 204)) return true;
    if (answers.every((a) => a.status === 404)) return false;
    throw errorOf(answers);
  }

  /** The glossary with its entries, for a translation; undefined when it does not exist for this owner. */
  async resolve(id: string, owner: string | undefined): Promise<ResolvedGlossary | undefined> {
    const key = `${owner ?? ''}\u0000${id}`;
    const kept = this.#kept.get(key);
    if (kept && performance.now() - kept.at < KEEP_MS) return kept.glossary;
    const [info, tsv] = await Promise.all([this.info(id, owner), this.entries(id, owner)]);
    if (info === undefined || tsv === undefined) return undefined;
    const entries: Record<string, string> = {};
    for (const line of tsv.split('\n')) {
      const tab = line.indexOf('\t');
      if (tab > 0) entries[line.slice(0, tab)] = line.slice(tab + 1);
    }
    const glossary = { info, entries };
    if (this.#kept.size >= MAX_KEPT) this.#kept.delete(this.#kept.keys().next().value!);
    this.#kept.set(key, { at: performance.now(), glossary });
    return glossary;
  }

  /** The first 200 body among the hosts, asked in turn; undefined when every host answered 404. */
  async #first(path: string, owner: string | undefined): Promise<string | undefined> {
    const answers: Answer[] = [];
    for (const origin of this.#upstream.origins()) {
      const answer = await this.#send(origin, 'GET', path, owner);
      if (answer.status === 200) return answer.body;
      answers.push(answer);
    }
    if (answers.every((a) => a.status === 404)) return undefined;
    throw errorOf(answers);
  }

  #everyHost(method: string, path: string, owner: string | undefined, body?: string): Promise<Answer[]> {
    return Promise.all(this.#upstream.origins().map((origin) => this.#send(origin, method, path, owner, body)));
  }

  async #send(origin: string, method: string, path: string, owner: string | undefined, body?: string) {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (owner !== undefined) headers['x-glossary-owner'] = owner;
    const authorization = this.#upstream.authorizationHeader();
    if (authorization !== undefined) headers.authorization = authorization;
    try {
      const response = await request(`${origin}${path}`, {
        method: method as 'GET',
        headers,
        ...(body === undefined ? {} : { body }),
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      const text = await response.body.text();
      return { status: response.statusCode, body: text, code: header(response.headers[ERROR_CODE_HEADER]) };
    } catch (err) {
      return { status: 0, body: (err as Error).message, code: undefined };
    }
  }
}

interface Answer {
  status: number;
  body: string;
  code: string | undefined;
}

/** What to answer when no model server took a glossary request: a model server's 4xx as it is, else a 502. */
function errorOf(answers: readonly Answer[]): ServeError {
  const refused = answers.find((a) => a.status >= 400 && a.status < 500);
  if (refused !== undefined) {
    let message = refused.body;
    try {
      message = (JSON.parse(refused.body) as { message?: string }).message ?? message;
    } catch {
      // not JSON: the text as it is
    }
    if (refused.status === 404) return new ServeError('GLOSSARY_NOT_FOUND', message);
    if (refused.status === 409) return new ServeError('CONFLICT', message);
    return new ServeError('BAD_REQUEST', message);
  }
  const why = answers.map((a) => (a.status === 0 ? a.body : `HTTP ${a.status}`)).join('; ');
  return new ServeError('UPSTREAM_UNAVAILABLE', `No model server took the glossary request (${why || 'none known'}).`);
}
