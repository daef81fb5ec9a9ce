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
 * DeepL's v3 multilingual glossaries (`/multilingual-glossaries` on the model servers) are made the same way, and
 * each change (a new name, dictionaries merged, replaced or deleted) is sent to every model server. They do change,
 * so a translation's dictionary is kept only until this router changes its glossary, and at most those seconds
 * when another router instance does.
 *
 * With API keys on, each glossary belongs to the key that made it (`x-glossary-owner`, the key's id): another key
 * neither sees nor uses it.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { ERROR_CODE_HEADER, ServeError } from '../common/errors.js';
import { AUTO_LANGUAGE } from '../common/translation-contract.js';
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

/** A dictionary of a multilingual glossary as DeepL's v3 describes it. */
export interface DictionaryInfo {
  source_lang: string;
  target_lang: string;
  entry_count: number;
}

/** A multilingual glossary as DeepL's v3 describes one (the model server answers in this shape). */
export interface MultilingualGlossaryInfo {
  glossary_id: string;
  name: string;
  dictionaries: DictionaryInfo[];
  creation_time: string;
}

/** A dictionary as it is sent: its entries TSV or CSV, as `entries_format` says. */
export interface DictionaryFields {
  source_lang: string;
  target_lang: string;
  entries: string;
  entries_format: 'tsv' | 'csv';
}

/** A dictionary's entries as DeepL's v3 answers them (TSV). */
export interface DictionaryEntries {
  source_lang: string;
  target_lang: string;
  entries: string;
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
    this.#forget(id, owner);
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
    const glossary = { info, entries: entriesOf(tsv) };
    this.#keep(key, glossary);
    return glossary;
  }

  /** Make a multilingual glossary on every model server (as `create`). */
  async createMultilingual(
    fields: { name: string; dictionaries: DictionaryFields[] },
    owner: string | undefined,
  ): Promise<MultilingualGlossaryInfo> {
    const answers = await this.#everyHost('PUT', `${V3}/${randomUUID()}`, owner, JSON.stringify(fields));
    const made = answers.find((a) => a.status === 201);
    if (made) return JSON.parse(made.body) as MultilingualGlossaryInfo;
    throw errorOf(answers);
  }

  /** Every glossary the owner may see, v2 ones as one dictionary, each once, oldest first. */
  async listMultilingual(owner: string | undefined): Promise<MultilingualGlossaryInfo[]> {
    const answers = await this.#everyHost('GET', V3, owner);
    const byId = new Map<string, MultilingualGlossaryInfo>();
    for (const answer of answers.filter((a) => a.status === 200)) {
      for (const info of (JSON.parse(answer.body) as { glossaries: MultilingualGlossaryInfo[] }).glossaries) {
        if (!byId.has(info.glossary_id)) byId.set(info.glossary_id, info);
      }
    }
    if (!answers.some((a) => a.status === 200)) throw errorOf(answers);
    return [...byId.values()].sort((a, b) => a.creation_time.localeCompare(b.creation_time));
  }

  /** A glossary of either kind as a multilingual one, or undefined when no model server has it for this owner. */
  async multilingualInfo(id: string, owner: string | undefined): Promise<MultilingualGlossaryInfo | undefined> {
    const body = await this.#first(`${V3}/${encodeURIComponent(id)}`, owner);
    return body === undefined ? undefined : (JSON.parse(body) as MultilingualGlossaryInfo);
  }

  /**
   * A glossary's dictionaries with their entries, the one for a pair when it is given; undefined when no model
   * server has the glossary for this owner. @throws ServeError GLOSSARY_NOT_FOUND when it lacks the pair
   */
  async dictionaryEntries(
    id: string,
    owner: string | undefined,
    pair?: { source: string; target: string },
  ): Promise<DictionaryEntries[] | undefined> {
    const query =
      pair === undefined ? '' : `?${new URLSearchParams({ source_lang: pair.source, target_lang: pair.target })}`;
    const body = await this.#first(`${V3}/${encodeURIComponent(id)}/entries${query}`, owner);
    return body === undefined ? undefined : (JSON.parse(body) as { dictionaries: DictionaryEntries[] }).dictionaries;
  }

  /**
   * Change a multilingual glossary on every model server that has it: `PATCH` (a new name, dictionaries merged in),
   * `PUT …/dictionaries` (one replaced), `DELETE …/dictionaries?…` (one removed). Returns the first answer's body.
   * @throws ServeError with a model server's 4xx (GLOSSARY_NOT_FOUND when none has it), or UPSTREAM_UNAVAILABLE
   */
  async changeMultilingual(
    id: string,
    owner: string | undefined,
    change: { method: 'PATCH' | 'PUT' | 'DELETE'; path?: string; body?: object },
  ): Promise<string> {
    this.#forget(id, owner);
    const path = `${V3}/${encodeURIComponent(id)}${change.path ?? ''}`;
    const body = change.body === undefined ? undefined : JSON.stringify(change.body);
    const answers = await this.#everyHost(change.method, path, owner, body);
    const done = answers.find((a) => a.status === 200 || a.status === 204);
    if (done !== undefined) return done.body;
    throw errorOf(answers);
  }

  /**
   * The entries a translation from `source` to `target` follows, from a glossary of either kind: undefined when
   * no model server has it for this owner, null when it has no dictionary for the pair.
   */
  async resolvePair(
    id: string,
    owner: string | undefined,
    source: string,
    target: string,
  ): Promise<Record<string, string> | null | undefined> {
    const key = `${owner ?? ''}\u0000${id}\u0000${source}-${target}`;
    const kept = this.#kept.get(key);
    if (kept && performance.now() - kept.at < KEEP_MS) return kept.glossary.entries;
    const all = await this.dictionaryEntries(id, owner);
    if (all === undefined) return undefined;
    const dictionary = all.find((d) => d.source_lang === source && d.target_lang === target);
    if (dictionary === undefined) return null;
    const entries = entriesOf(dictionary.entries);
    const info: GlossaryInfo = {
      glossary_id: id,
      name: '',
      ready: true,
      source_lang: source,
      target_lang: target,
      creation_time: '',
      entry_count: Object.keys(entries).length,
    };
    this.#keep(key, { info, entries });
    return entries;
  }

  /** Drops what is kept of a glossary: its v2 entries and each pair's. */
  #forget(id: string, owner: string | undefined): void {
    const key = `${owner ?? ''}\u0000${id}`;
    for (const kept of this.#kept.keys()) if (kept === key || kept.startsWith(`${key}\u0000`)) this.#kept.delete(kept);
  }

  #keep(key: string, glossary: ResolvedGlossary): void {
    if (this.#kept.size >= MAX_KEPT) this.#kept.delete(this.#kept.keys().next().value!);
    this.#kept.set(key, { at: performance.now(), glossary });
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

/** Where the model servers keep DeepL's v3 glossaries. */
const V3 = '/multilingual-glossaries';

/** TSV entries as source term → target term. */
function entriesOf(tsv: string): Record<string, string> {
  const entries: Record<string, string> = {};
  for (const line of tsv.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) entries[line.slice(0, tab)] = line.slice(tab + 1);
  }
  return entries;
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

/**
 * The entries of glossary `id` for a native request from `srcLang` (or `auto`) to `tgtLang`.
 * @throws ServeError BAD_REQUEST for a glossary the owner has not, or one of another pair
 */
export async function nativeGlossary(
  glossaries: GlossaryClient,
  id: string,
  owner: string | undefined,
  srcLang: string,
  tgtLang: string,
): Promise<Record<string, string>> {
  const glossary = await glossaries.resolve(id, owner);
  if (glossary === undefined) throw new ServeError('BAD_REQUEST', `Unknown glossary_id "${id}".`);
  const { source_lang: source, target_lang: target } = glossary.info;
  if (target !== tgtLang || (srcLang !== AUTO_LANGUAGE && srcLang !== source))
    throw new ServeError('BAD_REQUEST', `Glossary "${id}" is for ${source} → ${target}, not ${srcLang} → ${tgtLang}.`);
  return glossary.entries;
}
