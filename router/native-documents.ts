/**
 * @module router/native-documents — files through the native API, over the same document jobs as DeepL's and
 * LibreTranslate's (apis/documents.ts): `POST /documents` (multipart: `file`, `tgt_lang`, and `src_lang`, `auto` when
 * absent, `glossary_id`) answers 202 with the document's id and key; `GET /documents/{id}` its status,
 * `GET /documents/{id}/result` the translated file, `DELETE /documents/{id}` forgets it, each given
 * `?document_key=`. Errors are the native API's JSON (common/errors.ts) and keys are `POST /`'s: with keys on, an
 * `Authorization: Bearer` key, counted once the document holds its slot, unless NATIVE_API_OPEN.
 */
import type { Context, Hono } from 'hono';
import { ServeError } from '../common/errors.js';
import { AUTO_LANGUAGE, LANGUAGE_CODE } from '../common/translation-contract.js';
import { type GlossaryClient, nativeGlossary } from './glossaries.js';
import type { ApiAccess } from './keys/api-access.js';
import { admitKey, requireKey } from './keys/request-key.js';
import type { LanguageRoutes } from './language-routes.js';
import type { RouterEnv } from './router-env.js';
import { checkFilename, documentType, download, ownerOf, SUPPORTED_EXTENSIONS } from './apis/document-files.js';
import type { DocumentJobs } from './apis/documents.js';
import { type ApiContext, param, readUpload } from './apis/translate-texts.js';

export interface NativeDocumentsContext {
  api: ApiContext;
  routes: LanguageRoutes;
  /** `POST /`'s keys: absent when keys are off or NATIVE_API_OPEN. */
  keys: ApiAccess | undefined;
  glossaries: GlossaryClient | undefined;
}

export function mountNativeDocuments(app: Hono<RouterEnv>, context: NativeDocumentsContext): void {
  const { api, routes, keys } = context;
  const jobs = (): DocumentJobs => {
    if (api.documents === undefined)
      throw new ServeError('INTERNAL', 'Document translation is not available: RUN_DIR/documents cannot be made.');
    return api.documents;
  };
  const keyOf = (c: Context<RouterEnv>) => {
    const key = keys === undefined ? undefined : requireKey(keys, c.req.header('authorization'));
    if (key !== undefined) c.set('keyId', key.id);
    return key;
  };

  app.post('/documents', async (c) => {
    const documents = jobs();
    const { params, file } = await readUpload(c, api);
    const key = keyOf(c);
    if (file === undefined)
      throw new ServeError('BAD_REQUEST', 'Field "file" is missing: send the document as multipart/form-data.');
    checkFilename(file.name);
    if (documentType(file.name) === undefined)
      throw new ServeError(
        'BAD_REQUEST',
        `File "${file.name}" is none of the types translated: ${SUPPORTED_EXTENSIONS}.`,
      );
    const tgtLang = param(params, 'tgt_lang');
    if (tgtLang === undefined) throw new ServeError('BAD_REQUEST', 'Field "tgt_lang" is missing.');
    if (!routes.targets.includes(tgtLang))
      throw new ServeError(
        'UNKNOWN_LANGUAGE',
        `Field "tgt_lang": ${JSON.stringify(tgtLang)} is not served here; supported: ${routes.targets.join(', ')}.`,
      );
    const srcLang = param(params, 'src_lang') ?? AUTO_LANGUAGE;
    if (srcLang !== AUTO_LANGUAGE && !LANGUAGE_CODE.test(srcLang))
      throw new ServeError(
        'BAD_REQUEST',
        `Field "src_lang" must be a language code such as "en", or "auto", got ${JSON.stringify(srcLang)}.`,
      );
    if (!routes.serves(srcLang, tgtLang)) throw routes.unserved(srcLang, tgtLang);
    const glossaryId = param(params, 'glossary_id');
    if (glossaryId !== undefined && context.glossaries === undefined)
      throw new ServeError('BAD_REQUEST', 'Field "glossary_id": this router keeps no glossaries.');
    const glossary =
      glossaryId === undefined
        ? undefined
        : await nativeGlossary(context.glossaries!, glossaryId, key?.id, srcLang, tgtLang);
    c.set('tgtLang', tgtLang);
    c.set('texts', 1);
    const content = await documents.read(file.name, new Uint8Array(await file.arrayBuffer()));
    const made = await documents.submit(
      { ...content, filename: file.name, srcLang, tgtLang, glossary, api: 'native', owner: key && ownerOf(key) },
      key && keys && (() => admitKey(keys, key, content.characters).then(() => {})),
    );
    return c.json({ document_id: made.id, document_key: made.key, status: 'queued' }, 202);
  });

  /** The document a call names, when its `document_key` (and, keys on, the caller's key) are its own. */
  const documentOf = (c: Context<RouterEnv>) => {
    const key = keyOf(c);
    const documentKey = c.req.query('document_key');
    if (documentKey === undefined || documentKey === '')
      throw new ServeError('BAD_REQUEST', 'Query parameter "document_key" is missing: the key the upload answered.');
    const id = c.req.param('id') ?? '';
    const given = { key: documentKey, owner: key?.id };
    const view = jobs().view(id, given);
    if (view === undefined)
      throw new ServeError(
        'RESOURCE_NOT_FOUND',
        `Document "${id}" not found: never uploaded, expired, or another document_key or API key.`,
      );
    return { view, given };
  };

  app.get('/documents/:id', (c) => {
    const { view } = documentOf(c);
    return c.json({
      document_id: view.id,
      filename: view.filename,
      status: view.state,
      characters: view.characters,
      ...(view.error === null ? {} : { error: view.error }),
    });
  });

  app.get('/documents/:id/result', (c) => {
    const { view, given } = documentOf(c);
    if (view.state === 'error')
      throw new ServeError('CONFLICT', `Document "${view.id}" was not translated: ${view.error!.message}`);
    const file = view.state === 'done' ? jobs().result(view.id, given) : undefined;
    if (file === undefined)
      throw new ServeError('CONFLICT', `Document "${view.id}" is ${view.state}: ask again once its status is done.`, {
        retryAfterS: 1,
      });
    return download(file.bytes, file.filename, c.get('requestId'));
  });

  app.delete('/documents/:id', (c) => {
    const { view } = documentOf(c);
    jobs().remove(view.id);
    return c.json({ status: `Document "${view.id}" deleted.` });
  });
}
