/**
 * @module model-server/http/open-inference — the Open Inference Protocol's (KServe v2) tensors for a translation
 * model: decoding an inference request into texts and options, and encoding the translations as the response, in
 * JSON and in Triton's binary tensor data extension. No HTTP types and no model state: kserve-api.ts holds the
 * routes.
 *
 * A translation model takes:
 *   input  `text`      BYTES [N] (any shape holding N elements)  the source texts, each a sentence or a document
 *   input  `src_lang`  BYTES [1]                                 the source language, or "auto"; also accepted as
 *                                                                the request parameter `src_lang` (not both)
 * and answers:
 *   output `translated`         BYTES, the shape of `text`
 *   output `detected_src_lang`  BYTES, the shape of `text` (only with src_lang "auto")
 * Request parameters: `src_lang`, `split` ("sentences" | "none"), and the extension's `binary_data_output`.
 *
 * Specifications followed: kserve/open-inference-protocol specification/protocol/inference_rest.md (request and
 * response objects, `{"error"}`), triton-inference-server/server docs/protocol/extension_binary_data.md (a BYTES
 * element is a 4-byte little-endian length then its bytes; JSON header first, its length in
 * `Inference-Header-Content-Length`).
 */
import { ServeError } from '../../common/errors.js';
import { decodeUtf8, parseJsonBody } from '../../common/strict-utf8.js';
import { AUTO_LANGUAGE } from '../../common/translation-contract.js';

/** The input tensor holding the source texts. */
export const TEXT_INPUT = 'text';
/** The input tensor (or request parameter) holding the source language. */
export const SRC_LANG_INPUT = 'src_lang';
export const TRANSLATED_OUTPUT = 'translated';
export const DETECTED_OUTPUT = 'detected_src_lang';
export const OUTPUT_NAMES: readonly string[] = [TRANSLATED_OUTPUT, DETECTED_OUTPUT];
/** The header that gives the JSON part's length when binary tensor data follows it. */
export const HEADER_LENGTH_HEADER = 'inference-header-content-length';

/** One output the client asked for, in the order it asked. */
export interface RequestedOutput {
  name: string;
  binary: boolean;
}

/** An inference request, checked and decoded. */
export interface DecodedInferRequest {
  id: string | undefined;
  texts: string[];
  /** The shape of the `text` input; the outputs take it. */
  shape: number[];
  srcLang: string;
  split: string | undefined;
  /** What to answer: the client's `outputs` or, when it named none, undefined (every output, JSON unless
   * `binary_data_output`). */
  outputs: RequestedOutput[] | undefined;
  binaryOutputs: boolean;
}

const bad = (message: string) => new ServeError('BAD_REQUEST', message);
const notDetected = () => bad(`Output "${DETECTED_OUTPUT}" is only produced when src_lang is "${AUTO_LANGUAGE}".`);
const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * Decode a request body: JSON, or (when `headerLength` is given) a JSON header of that many bytes followed by the
 * binary data of the inputs that carry `binary_data_size`, in input order.
 * @throws ServeError BAD_REQUEST naming the tensor or field at fault
 */
export function decodeInferRequest(raw: Uint8Array, headerLength: string | undefined): DecodedInferRequest {
  const jsonLength = headerLength === undefined ? raw.length : Number(headerLength);
  if (!Number.isSafeInteger(jsonLength) || jsonLength < 0 || jsonLength > raw.length) {
    throw bad(`Inference-Header-Content-Length must be a byte count within the body (${raw.length} bytes).`);
  }
  // A header length of 0 is the extension's raw binary request: one input, no JSON, which leaves no room for a
  // second input or its name here.
  if (jsonLength === 0) throw bad('A raw binary request (no JSON header) is not supported: send the JSON header.');
  const request: unknown = parseJsonBody(decodeUtf8(raw.subarray(0, jsonLength), 'The JSON header'));
  if (!isObject(request)) throw bad('The inference request must be a JSON object.');
  const { id, parameters = {}, inputs, outputs } = request;
  if (id !== undefined && typeof id !== 'string') throw bad('"id" must be a string.');
  if (!isObject(parameters)) throw bad('"parameters" must be an object.');
  if (!Array.isArray(inputs) || inputs.length === 0) throw bad('"inputs" must be a non-empty array of tensors.');

  const binary = new BinaryCursor(raw.subarray(jsonLength));
  const tensors = new Map<string, { shape: number[]; data: unknown[] }>();
  inputs.forEach((input, i) => {
    if (!isObject(input) || typeof input.name !== 'string') throw bad(`inputs[${i}] must be an object with a "name".`);
    const name = input.name;
    if (name !== TEXT_INPUT && name !== SRC_LANG_INPUT) {
      throw bad(`Unexpected input "${name}": this model takes "${TEXT_INPUT}" and "${SRC_LANG_INPUT}".`);
    }
    if (tensors.has(name)) throw bad(`Input "${name}" is given twice.`);
    if (input.datatype !== 'BYTES') {
      throw bad(`Input "${name}" has datatype ${JSON.stringify(input.datatype)}; it must be "BYTES".`);
    }
    const shape = shapeOf(input.shape, name);
    const count = shape.reduce((n, d) => n * d, 1);
    const inputParameters = input.parameters ?? {};
    if (!isObject(inputParameters)) throw bad(`Input "${name}": "parameters" must be an object.`);
    const size = inputParameters.binary_data_size;
    let data: unknown[];
    if (size !== undefined) {
      if (!Number.isSafeInteger(size) || (size as number) < 0) {
        throw bad(`Input "${name}": binary_data_size must be a byte count.`);
      }
      data = decodeBytesElements(binary.take(size as number, name), name);
    } else {
      if (!Array.isArray(input.data)) throw bad(`Input "${name}" needs "data" (an array) or binary_data_size.`);
      // Flat, or nested as deep as the shape at most: never flattened without bound (a hostile depth).
      data = input.data.flat(shape.length - 1);
      if (data.some(Array.isArray)) {
        throw bad(`Input "${name}": "data" is nested deeper than its shape [${shape.join(', ')}].`);
      }
    }
    if (data.length !== count) {
      throw bad(
        `Input "${name}" has shape [${shape.join(', ')}] (${count} elements) but ${data.length} data elements.`,
      );
    }
    data.forEach((element, j) => {
      if (typeof element !== 'string') throw bad(`Input "${name}" element ${j} must be a string (BYTES).`);
    });
    tensors.set(name, { shape, data });
  });
  if (binary.remaining > 0) throw bad(`${binary.remaining} bytes of binary data follow the inputs unclaimed.`);

  const text = tensors.get(TEXT_INPUT);
  if (text === undefined) throw bad(`Input "${TEXT_INPUT}" (BYTES, the source texts) is missing.`);
  if (text.data.length === 0) throw bad(`Input "${TEXT_INPUT}" has no elements.`);
  const texts = text.data as string[];
  texts.forEach((t, j) => {
    if (t.trim() === '') throw bad(`Input "${TEXT_INPUT}" element ${j} is empty.`);
  });

  const srcLang = sourceLanguage(tensors.get(SRC_LANG_INPUT)?.data as string[] | undefined, parameters.src_lang);
  const split = parameters.split;
  if (split !== undefined && typeof split !== 'string') throw bad('Parameter "split" must be a string.');
  const binaryOutputs = flag(parameters.binary_data_output, 'Parameter "binary_data_output"') ?? false;
  const wanted = outputs === undefined ? undefined : requestedOutputs(outputs, binaryOutputs);
  // Refused before any job runs: the answer could not hold it.
  if (srcLang !== AUTO_LANGUAGE && wanted?.some((o) => o.name === DETECTED_OUTPUT)) throw notDetected();
  return { id, texts, shape: text.shape, srcLang, split, outputs: wanted, binaryOutputs };
}

/** The response's outputs, named and shaped; `detected` is undefined unless the language was detected. */
export interface InferAnswer {
  modelName: string;
  modelVersion: string;
  translated: string[];
  detected: string[] | undefined;
}

/** An encoded response: the body and, for binary tensor data, the headers it needs. */
export interface EncodedInferResponse {
  body: string | Uint8Array<ArrayBuffer>;
  headers: Record<string, string>;
}

/**
 * Encode the answer to `request`: the requested outputs in the order asked (every output when none were), JSON
 * unless some output asked for binary data.
 * @throws ServeError BAD_REQUEST when `detected_src_lang` was asked for and no language was detected (an echo model)
 */
export function encodeInferResponse(request: DecodedInferRequest, answer: InferAnswer): EncodedInferResponse {
  const values: Record<string, string[] | undefined> = {
    [TRANSLATED_OUTPUT]: answer.translated,
    [DETECTED_OUTPUT]: answer.detected,
  };
  const wanted =
    request.outputs ??
    OUTPUT_NAMES.filter((name) => values[name] !== undefined).map((name) => ({ name, binary: request.binaryOutputs }));
  const blobs: Uint8Array[] = [];
  const outputs = wanted.map(({ name, binary }) => {
    const data = values[name];
    if (data === undefined) throw notDetected();
    const tensor = { name, datatype: 'BYTES', shape: request.shape };
    if (!binary) return { ...tensor, data };
    const blob = encodeBytesElements(data);
    blobs.push(blob);
    return { ...tensor, parameters: { binary_data_size: blob.length } };
  });
  const response = {
    model_name: answer.modelName,
    model_version: answer.modelVersion,
    ...(request.id === undefined ? {} : { id: request.id }),
    outputs,
  };
  const json = JSON.stringify(response);
  if (blobs.length === 0) return { body: json, headers: { 'content-type': 'application/json' } };
  const header = Buffer.from(json, 'utf8');
  return {
    body: Buffer.concat([header, ...blobs]),
    headers: { 'content-type': 'application/octet-stream', [HEADER_LENGTH_HEADER]: String(header.length) },
  };
}

/** BYTES elements as the binary extension lays them out: each a uint32 little-endian length, then its bytes. */
export function encodeBytesElements(elements: readonly string[]): Uint8Array {
  const parts = elements.flatMap((element) => {
    const bytes = Buffer.from(element, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32LE(bytes.length);
    return [length, bytes];
  });
  return Buffer.concat(parts);
}

/** The inverse of `encodeBytesElements`; every element must be valid UTF-8 (they are texts). */
export function decodeBytesElements(blob: Uint8Array, name: string): string[] {
  const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const elements: string[] = [];
  for (let offset = 0; offset < blob.length;) {
    if (offset + 4 > blob.length) throw bad(`Input "${name}": binary BYTES data ends inside an element's length.`);
    const length = view.getUint32(offset, true);
    offset += 4;
    if (offset + length > blob.length) throw bad(`Input "${name}": binary BYTES element overruns its data.`);
    elements.push(decodeUtf8(blob.subarray(offset, offset + length), `Input "${name}" element ${elements.length}`));
    offset += length;
  }
  return elements;
}

/** The binary part of a request, handed out in input order. */
class BinaryCursor {
  #data: Uint8Array;
  #offset = 0;

  constructor(data: Uint8Array) {
    this.#data = data;
  }

  get remaining(): number {
    return this.#data.length - this.#offset;
  }

  take(size: number, name: string): Uint8Array {
    if (size > this.remaining) {
      throw bad(`Input "${name}" claims ${size} bytes of binary data; ${this.remaining} remain in the body.`);
    }
    const part = this.#data.subarray(this.#offset, this.#offset + size);
    this.#offset += size;
    return part;
  }
}

function shapeOf(shape: unknown, name: string): number[] {
  if (!Array.isArray(shape) || shape.length === 0 || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw bad(`Input "${name}": "shape" must be a non-empty array of non-negative integers.`);
  }
  return shape as number[];
}

function sourceLanguage(tensor: string[] | undefined, parameter: unknown): string {
  if (parameter !== undefined && typeof parameter !== 'string') throw bad('Parameter "src_lang" must be a string.');
  if (tensor !== undefined && tensor.length !== 1) {
    throw bad(`Input "${SRC_LANG_INPUT}" must hold one element (the language of every text), not ${tensor.length}.`);
  }
  const fromTensor = tensor?.[0];
  if (fromTensor !== undefined && parameter !== undefined && fromTensor !== parameter) {
    throw bad(`src_lang is given twice and differs: input "${fromTensor}", parameter "${parameter}".`);
  }
  const lang = fromTensor ?? parameter;
  if (lang === undefined) {
    throw bad(
      `src_lang is missing: give input "${SRC_LANG_INPUT}" (BYTES [1]) or parameter "src_lang" ("auto" detects).`,
    );
  }
  return lang;
}

function requestedOutputs(outputs: unknown, binaryDefault: boolean): RequestedOutput[] {
  if (!Array.isArray(outputs)) throw bad('"outputs" must be an array.');
  const seen = new Set<string>();
  return outputs.map((output, i) => {
    if (!isObject(output) || typeof output.name !== 'string')
      throw bad(`outputs[${i}] must be an object with a "name".`);
    const name = output.name;
    if (!OUTPUT_NAMES.includes(name)) {
      throw bad(`Unexpected output "${name}": this model answers ${OUTPUT_NAMES.map((n) => `"${n}"`).join(' and ')}.`);
    }
    if (seen.has(name)) throw bad(`Output "${name}" is asked for twice.`);
    seen.add(name);
    const parameters = output.parameters ?? {};
    if (!isObject(parameters)) throw bad(`Output "${name}": "parameters" must be an object.`);
    return { name, binary: flag(parameters.binary_data, `Output "${name}": binary_data`) ?? binaryDefault };
  });
}

function flag(value: unknown, what: string): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') throw bad(`${what} must be a boolean.`);
  return value;
}
