/**
 * @module router/apis/deepl-documents — DeepL's document API (`deepl-node`'s `translateDocument`, and the
 * upload / status / download calls it makes) over the router's document jobs (./documents.ts): `POST /v2/document`
 * (multipart: `file`, `target_lang`, and `source_lang`, `filename`, `output_format`, `glossary_id`, `formality`),
 * `POST|GET /v2/document/{id}` and `POST|GET /v2/document/{id}/result` with the `document_key` the upload answered.
 * The file types: .txt, .htm/.html, .srt, .vtt, .docx, .pptx, .xlsx, .odt, .odp and .epub (./document-files.ts);
 * DeepL's PDF is refused here. As DeepL does, a result is removed once downloaded. Every call names the document by its id
 * and `document_key` (and, keys on, the API key that uploaded it); an upload is billed once it has its slot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, Hono } from 'hono';
import { ServeError } from '../../common/errors.js';
import type { RouterEnv } from '../router-env.js';
import type { DeepLLanguages } from './deepl-languages.js';
import { admit, answer, authorize, DeepLError, requestParams, unsupported } from './deepl-dialect.js';
import { translationPair } from './deepl-glossaries.js';
import {
  checkFilename,
  type DocumentContent,
  DOCUMENT_TYPES,
  documentType,
  download,
  ownerOf,
  SUPPORTED_EXTENSIONS,
} from './document-files.js';
import type { DocumentJobs } from './documents.js';
import { type ApiContext, characterCount, param, type Params, readUpload } from './translate-texts.js';

/**
 * How long an upload waits for its document before answering. deepl-node asks for the status right after the upload
 * and then every 5 s: a small file done within this is fetched at once instead of 5 s later.
 */
const UPLOAD_WAIT_MS = 1_000;

/** The upload read as its type says, or DeepL's 400 for file data that is not (its wording, which clients match on). */
async function fileContent(documents: DocumentJobs, filename: string, bytes: Uint8Array): Promise<DocumentContent> {
  try {
    return await documents.read(filename, bytes);
  } catch (err) {
    if (err instanceof ServeError && err.status === 400) throw new DeepLError(400, `Invalid file data: ${err.message}`);
    throw err;
  }
}

/**
 * Registers DeepL's document routes. `check(params)` applies `/v2/translate`'s checks to the parameters both take
 * (formality and the unsupported ones).
 */
export function mountDocuments(
  app: Hono<RouterEnv>,
  context: ApiContext,
  languages: DeepLLanguages,
  check: (params: Params) => void,
): void {
  const jobs = () => {
    if (context.documents === undefined) throw new DeepLError(503, 'Document translation is not available.');
    return context.documents;
  };

  app.post('/v2/document', (c) =>
    answer(context, c, async () => {
      const documents = jobs();
      const { params, file } = await readUpload(c, context);
      const key = authorize(c, params, context);
      check(params);
      if (file === undefined) throw new DeepLError(400, "Parameter 'file' not specified.");
      const filename = param(params, 'filename') || file.name;
      checkFilename(filename);
      const type = documentType(filename);
      if (type === undefined)
        throw new DeepLError(
          400,
          `Invalid file data or file extension: '${filename}' is none of ${SUPPORTED_EXTENSIONS}.`,
        );
      const output = param(params, 'output_format');
      if (output !== undefined && output !== '' && DOCUMENT_TYPES[output.toLowerCase()]?.format !== type.format)
        throw unsupported('output_format');
      const { srcLang, tgtLang, glossary } = await translationPair(context, params, languages, key);
      // Refused before it is billed; one detected in its target language fails in the job (translate-texts.ts).
      if (srcLang === tgtLang) throw new DeepLError(400, 'Source and target language are equal.');
      c.set('tgtLang', tgtLang);
      c.set('texts', 1);
      const content = await fileContent(documents, filename, new Uint8Array(await file.arrayBuffer()));
      const made = await documents.submit(
        { ...content, filename, srcLang, tgtLang, glossary, api: 'deepl', owner: key && ownerOf(key) },
        key && (() => admit(context, key, content.characters).then(() => {})),
      );
      await Promise.race([documents.settled(made.id), sleep(UPLOAD_WAIT_MS)]);
      return { document_id: made.id, document_key: made.key };
    }),
  );

  /** The document a status or download call names, when its key (and the caller's API key) are its own. */
  const documentOf = async (c: Context<RouterEnv>) => {
    const params = await requestParams(c, context);
    const key = authorize(c, params, context);
    const documentKey = param(params, 'document_key');
    if (documentKey === undefined || documentKey === '')
      throw new DeepLError(400, "Parameter 'document_key' not specified.");
    const given = { key: documentKey, owner: key?.id };
    const view = jobs().view(c.req.param('id') ?? '', given);
    if (view === undefined) throw new DeepLError(404, 'Document not found');
    return { view, given };
  };

  const status = (c: Context<RouterEnv>) =>
    answer(context, c, async () => {
      const { view } = await documentOf(c);
      return {
        document_id: view.id,
        status: view.state,
        ...(view.state === 'done' ? { billed_characters: view.characters } : {}),
        ...(view.error === null ? {} : { error_message: view.error.message }),
      };
    });
  app.post('/v2/document/:id', status);
  app.get('/v2/document/:id', status);

  const result = (c: Context<RouterEnv>) =>
    answer(context, c, async () => {
      const { view, given } = await documentOf(c);
      if (view.state === 'error') throw new DeepLError(400, `Document translation failed: ${view.error!.message}`);
      // DeepL's 503 here is what its clients read as "not ready yet", not as an outage.
      const file = view.state === 'done' ? jobs().result(view.id, given) : undefined;
      if (file === undefined) throw new DeepLError(503, 'Document not ready');
      jobs().remove(view.id);
      return download(file.bytes, file.filename, c.get('requestId'));
    });
  app.post('/v2/document/:id/result', result);
  app.get('/v2/document/:id/result', result);
}
