/**
 * @module router/apis/document-files — what a translated file is to the APIs that take one (./deepl-documents.ts,
 * ./libretranslate.ts): the types translated, an upload's name and text checked, and a result sent back as a download.
 * Text types go to the model server as a document of their format; Office and EPUB files are zip containers whose
 * text units the router sends as plain text (./document-office.ts).
 */
import { ServeError } from '../../common/errors.js';
import { decodeUtf8 } from '../../common/strict-utf8.js';
import { type ApiKey, DEFAULT_MAX_DOCUMENTS } from '../keys/api-access.js';
import { OFFICE_KINDS, type OfficeKind } from '../../model-server/text/office/office-document.js';
import type { DocumentFormat } from './document-pieces.js';

/**
 * A file type this server translates: what the model server calls it (or, for a zip container, which kind of Office
 * file it is), and what its result is sent as.
 */
export interface DocumentType {
  format: DocumentFormat | OfficeKind;
  contentType: string;
}

/** Whether a type's format is an Office or EPUB container. */
export const isOffice = (format: DocumentFormat | OfficeKind): format is OfficeKind =>
  (OFFICE_KINDS as readonly string[]).includes(format);

const OOXML_TYPE = 'application/vnd.openxmlformats-officedocument';

/**
 * An upload's content as `DocumentJobs.read` checked it — a text file's text (without its byte order mark, and
 * whether it had one) or an Office file's bytes — and the characters it has to translate.
 */
export type DocumentContent = ({ text: string; bom: boolean } | { bytes: Uint8Array }) & { characters: number };

/** The file types translated, by extension (lower case). */
export const DOCUMENT_TYPES: Readonly<Record<string, DocumentType>> = {
  txt: { format: 'text', contentType: 'text/plain; charset=utf-8' },
  htm: { format: 'html', contentType: 'text/html; charset=utf-8' },
  html: { format: 'html', contentType: 'text/html; charset=utf-8' },
  srt: { format: 'srt', contentType: 'application/x-subrip; charset=utf-8' },
  vtt: { format: 'vtt', contentType: 'text/vtt; charset=utf-8' },
  docx: { format: 'docx', contentType: `${OOXML_TYPE}.wordprocessingml.document` },
  pptx: { format: 'pptx', contentType: `${OOXML_TYPE}.presentationml.presentation` },
  xlsx: { format: 'xlsx', contentType: `${OOXML_TYPE}.spreadsheetml.sheet` },
  odt: { format: 'odt', contentType: 'application/vnd.oasis.opendocument.text' },
  odp: { format: 'odp', contentType: 'application/vnd.oasis.opendocument.presentation' },
  epub: { format: 'epub', contentType: 'application/epub+zip' },
};

/** The extensions translated, as a refusal names them: `.txt, .htm, …`. */
export const SUPPORTED_EXTENSIONS = Object.keys(DOCUMENT_TYPES)
  .map((extension) => `.${extension}`)
  .join(', ');

/** A document's owner as `DocumentJobs.submit` takes it: the API key, with its share of the folder. */
export function ownerOf(key: ApiKey): { id: string; maxDocuments: number } {
  return { id: key.id, maxDocuments: key.maxDocuments ?? DEFAULT_MAX_DOCUMENTS };
}

/** A file name's type, or undefined when it is not one translated here. */
export function documentType(filename: string): DocumentType | undefined {
  const dot = filename.lastIndexOf('.');
  return dot < 0 ? undefined : DOCUMENT_TYPES[filename.slice(dot + 1).toLowerCase()];
}

/** `Content-Disposition` of a download named `filename`: an ASCII fallback and the exact name (RFC 6266, 8187). */
function attachment(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** Longest file name kept. */
const MAX_FILENAME_CHARS = 255;

/** @throws ServeError BAD_REQUEST for a file name too long to keep (it goes back in Content-Disposition) */
export function checkFilename(filename: string): void {
  if (filename.length > MAX_FILENAME_CHARS)
    throw new ServeError('BAD_REQUEST', `The file name is longer than ${MAX_FILENAME_CHARS} characters.`);
}

/** An uploaded file's text. @throws ServeError BAD_REQUEST when it is not UTF-8 text */
export function readDocument(bytes: Uint8Array): { text: string; bom: boolean } {
  const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  const text = decodeUtf8(bom ? bytes.subarray(3) : bytes, 'The file');
  if (text.includes('\u0000')) throw new ServeError('BAD_REQUEST', 'The file is not text (it holds NUL bytes).');
  return { text, bom };
}

/** A translated file as a download named `filename`, its type from its extension. */
export function download(bytes: Uint8Array<ArrayBuffer>, filename: string, requestId: string): Response {
  return new Response(bytes, {
    status: 200,
    headers: {
      'content-type': documentType(filename)?.contentType ?? 'application/octet-stream',
      'content-disposition': attachment(filename),
      'x-request-id': requestId,
    },
  });
}
