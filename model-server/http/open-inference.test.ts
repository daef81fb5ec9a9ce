import { describe, expect, it } from 'vitest';
import { OPEN_INFERENCE_SPEC_EXAMPLE } from '../../harness/http.js';
import { ServeError } from '../../common/errors.js';
import {
  decodeBytesElements,
  decodeInferRequest,
  encodeBytesElements,
  encodeInferResponse,
  type DecodedInferRequest,
} from './open-inference.js';

const json = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));
const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ServeError);
    return { code: (err as ServeError).code, message: (err as ServeError).message };
  }
  return expect.unreachable('no refusal');
};
/** A binary-extension body: the JSON header, then the blobs. */
const withBinary = (header: unknown, ...blobs: Uint8Array[]) => {
  const head = json(header);
  return { raw: new Uint8Array(Buffer.concat([head, ...blobs])), headerLength: String(head.length) };
};

const text = (data: unknown, shape = [Array.isArray(data) ? data.length : 1]) => ({
  name: 'text',
  datatype: 'BYTES',
  shape,
  data,
});
const srcLang = (lang: string) => ({ name: 'src_lang', datatype: 'BYTES', shape: [1], data: [lang] });

describe('Open Inference Protocol tensors for a translation model', () => {
  it("the spec's example request (inference_rest.md, Inference Request Examples) is refused: not this model's inputs", () => {
    const specExample = OPEN_INFERENCE_SPEC_EXAMPLE;
    expect(refusal(() => decodeInferRequest(json(specExample), undefined))).toEqual({
      code: 'BAD_REQUEST',
      message: 'Unexpected input "input0": this model takes "text" and "src_lang".',
    });
    // The same request with this model's input names: the datatype, then the element count, then the output.
    const renamed = structuredClone(specExample);
    renamed.inputs[0]!.name = 'text';
    expect(refusal(() => decodeInferRequest(json(renamed), undefined)).message).toBe(
      'Input "text" has datatype "UINT32"; it must be "BYTES".',
    );
    const counted = { ...renamed, inputs: [{ ...renamed.inputs[1]!, name: 'text', datatype: 'BYTES' }] };
    expect(refusal(() => decodeInferRequest(json(counted), undefined)).message).toBe(
      'Input "text" has shape [3] (3 elements) but 1 data elements.',
    );
    const output = { ...renamed, inputs: [text(['a']), srcLang('en')] };
    expect(refusal(() => decodeInferRequest(json(output), undefined)).message).toBe(
      'Unexpected output "output0": this model answers "translated" and "detected_src_lang".',
    );
  });

  it("the binary extension's example request (extension_binary_data.md) is refused the same way", () => {
    // triton-inference-server/server docs/protocol/extension_binary_data.md, "Binary Tensor Request" example.
    const { raw, headerLength } = withBinary(
      {
        model_name: 'mymodel',
        inputs: [
          { name: 'input0', shape: [2, 2], datatype: 'UINT32', parameters: { binary_data_size: 16 } },
          { name: 'input1', shape: [3], datatype: 'BOOL', parameters: { binary_data_size: 3 } },
        ],
        outputs: [{ name: 'output0', parameters: { binary_data: true } }],
      },
      new Uint8Array(16),
      new Uint8Array(3),
    );
    expect(refusal(() => decodeInferRequest(raw, headerLength)).message).toBe(
      'Unexpected input "input0": this model takes "text" and "src_lang".',
    );
    // Its raw binary request (Inference-Header-Content-Length: 0) has no room for two inputs.
    expect(refusal(() => decodeInferRequest(new Uint8Array(16), '0')).message).toBe(
      'A raw binary request (no JSON header) is not supported: send the JSON header.',
    );
  });

  it('decodes texts in any shape, src_lang as an input or a parameter, split, id and outputs', () => {
    const decoded = decodeInferRequest(
      json({
        id: 'r1',
        parameters: { split: 'none' },
        inputs: [text([['Hello.'], ['Bye.']], [2, 1]), srcLang('en')],
        outputs: [{ name: 'translated' }],
      }),
      undefined,
    );
    expect(decoded).toEqual({
      id: 'r1',
      texts: ['Hello.', 'Bye.'],
      shape: [2, 1],
      srcLang: 'en',
      split: 'none',
      outputs: [{ name: 'translated', binary: false }],
      binaryOutputs: false,
    });
    const byParameter = decodeInferRequest(
      json({ parameters: { src_lang: 'auto' }, inputs: [text(['Hi'])] }),
      undefined,
    );
    expect(byParameter).toMatchObject({ srcLang: 'auto', id: undefined, outputs: undefined });
  });

  it('refuses bad tensors with a message naming what is wrong', () => {
    const cases: [unknown, string][] = [
      [[], 'The inference request must be a JSON object.'],
      [{ inputs: [] }, '"inputs" must be a non-empty array of tensors.'],
      [{ id: 42, inputs: [text(['a'])] }, '"id" must be a string.'],
      [{ inputs: [srcLang('en')] }, 'Input "text" (BYTES, the source texts) is missing.'],
      [
        { inputs: [text(['a'])] },
        'src_lang is missing: give input "src_lang" (BYTES [1]) or parameter "src_lang" ("auto" detects).',
      ],
      [{ inputs: [text(['a']), text(['b'])] }, 'Input "text" is given twice.'],
      [
        { inputs: [text(['a'], [-1]), srcLang('en')] },
        'Input "text": "shape" must be a non-empty array of non-negative integers.',
      ],
      [{ inputs: [text([1]), srcLang('en')] }, 'Input "text" element 0 must be a string (BYTES).'],
      [
        { inputs: [text([['a'], ['b']], [2]), srcLang('en')] },
        'Input "text": "data" is nested deeper than its shape [2].',
      ],
      [{ inputs: [text(['a', ' ']), srcLang('en')] }, 'Input "text" element 1 is empty.'],
      [{ inputs: [text([], [0]), srcLang('en')] }, 'Input "text" has no elements.'],
      [
        { inputs: [{ ...text(['a']), data: undefined }, srcLang('en')] },
        'Input "text" needs "data" (an array) or binary_data_size.',
      ],
      [
        { parameters: { src_lang: 'de' }, inputs: [text(['a']), srcLang('en')] },
        'src_lang is given twice and differs: input "en", parameter "de".',
      ],
      [
        { inputs: [text(['a']), { ...srcLang('en'), shape: [2], data: ['en', 'de'] }] },
        'Input "src_lang" must hold one element (the language of every text), not 2.',
      ],
      [
        { inputs: [text(['a']), srcLang('en')], outputs: [{ name: 'translated' }, { name: 'translated' }] },
        'Output "translated" is asked for twice.',
      ],
      [
        { inputs: [text(['a']), srcLang('en')], outputs: [{ name: 'detected_src_lang' }] },
        'Output "detected_src_lang" is only produced when src_lang is "auto".',
      ],
    ];
    for (const [body, message] of cases) {
      expect(refusal(() => decodeInferRequest(json(body), undefined))).toEqual({ code: 'BAD_REQUEST', message });
    }
    // 100,000 levels deep: refused as a 400 (flattened without bound, it overflowed the stack: a 500).
    const deep = `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":${'['.repeat(100_000)}"a"${']'.repeat(100_000)}},${JSON.stringify(srcLang('en'))}]}`;
    expect(refusal(() => decodeInferRequest(new TextEncoder().encode(deep), undefined))).toEqual({
      code: 'BAD_REQUEST',
      message: 'Input "text": "data" is nested deeper than its shape [1].',
    });
    expect(refusal(() => decodeInferRequest(new TextEncoder().encode('{"inputs":'), undefined))).toMatchObject({
      code: 'INVALID_JSON',
      message: expect.stringMatching(/^Request body is not valid JSON: /),
    });
  });

  it('binary tensor data: BYTES elements as length-prefixed UTF-8, in input order, every byte claimed', () => {
    const texts = ['Hello world', 'Grüße, 世界', ''];
    const blob = encodeBytesElements(texts);
    expect(Array.from(blob.subarray(0, 4))).toEqual([11, 0, 0, 0]);
    expect(decodeBytesElements(blob, 'text')).toEqual(texts);

    const lang = encodeBytesElements(['en']);
    const texts2 = encodeBytesElements(['One.', 'Two.']);
    const { raw, headerLength } = withBinary(
      {
        inputs: [
          { name: 'src_lang', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: lang.length } },
          { name: 'text', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: texts2.length } },
        ],
        parameters: { binary_data_output: true },
      },
      lang,
      texts2,
    );
    expect(decodeInferRequest(raw, headerLength)).toMatchObject({
      texts: ['One.', 'Two.'],
      srcLang: 'en',
      binaryOutputs: true,
    });
    const extra = withBinary({ inputs: [text(['a']), srcLang('en')] }, new Uint8Array(2));
    expect(refusal(() => decodeInferRequest(extra.raw, extra.headerLength)).message).toBe(
      '2 bytes of binary data follow the inputs unclaimed.',
    );
    const short = withBinary(
      { inputs: [{ name: 'text', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: 9 } }] },
      new Uint8Array(4),
    );
    expect(refusal(() => decodeInferRequest(short.raw, short.headerLength)).message).toBe(
      'Input "text" claims 9 bytes of binary data; 4 remain in the body.',
    );
    expect(refusal(() => decodeBytesElements(Uint8Array.from([5, 0, 0, 0, 65]), 'text')).message).toBe(
      'Input "text": binary BYTES element overruns its data.',
    );
    expect(refusal(() => decodeBytesElements(Uint8Array.from([1, 0, 0, 0, 0xff]), 'text')).message).toBe(
      'Input "text" element 0 is not valid UTF-8.',
    );
  });

  it('encodes the outputs asked for, in that order, as JSON or binary, with the shape of the texts', () => {
    const request: DecodedInferRequest = {
      id: '42',
      texts: ['a', 'b'],
      shape: [2, 1],
      srcLang: 'auto',
      split: undefined,
      outputs: [
        { name: 'detected_src_lang', binary: false },
        { name: 'translated', binary: true },
      ],
      binaryOutputs: false,
    };
    const answer = { modelName: 'en', modelVersion: '1.0', translated: ['A', 'Bé'], detected: ['de', 'fr'] };
    const encoded = encodeInferResponse(request, answer);
    const body = Buffer.from(encoded.body as Uint8Array);
    const headerLength = Number(encoded.headers['inference-header-content-length']);
    expect(encoded.headers['content-type']).toBe('application/octet-stream');
    expect(JSON.parse(body.subarray(0, headerLength).toString('utf8'))).toEqual({
      model_name: 'en',
      model_version: '1.0',
      id: '42',
      outputs: [
        { name: 'detected_src_lang', datatype: 'BYTES', shape: [2, 1], data: ['de', 'fr'] },
        { name: 'translated', datatype: 'BYTES', shape: [2, 1], parameters: { binary_data_size: 4 + 1 + 4 + 3 } },
      ],
    });
    expect(decodeBytesElements(body.subarray(headerLength), 'translated')).toEqual(['A', 'Bé']);

    // No outputs named: every output there is, JSON; no id given, none answered.
    const all = encodeInferResponse(
      { ...request, id: undefined, outputs: undefined },
      { ...answer, detected: undefined },
    );
    expect(JSON.parse(all.body as string)).toEqual({
      model_name: 'en',
      model_version: '1.0',
      outputs: [{ name: 'translated', datatype: 'BYTES', shape: [2, 1], data: ['A', 'Bé'] }],
    });
    expect(refusal(() => encodeInferResponse(request, { ...answer, detected: undefined })).message).toBe(
      'Output "detected_src_lang" is only produced when src_lang is "auto".',
    );
  });
});
