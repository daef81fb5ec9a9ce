/**
 * @module worker/handlers/echo — a handler that returns its input: for plumbing tests and for benchmarks of the
 * serving overhead (everything but the model).
 *
 * A translation-shaped body `{src_lang, src_text}` is answered `{"translated": src_text}`, so the whole stack
 * (nginx → router → model server → worker) can be measured with echo in place of the model; a `src_text` that
 * is not a string fails that one request with 400, as the translation handler would. Any other body comes back
 * unchanged.
 */
import { ServeError } from '../../../common/errors.js';
import type { JsonValue } from '../../../common/strict-utf8.js';
import type { BatchItem, DeviceInfo } from '../../protocol.js';
import type { Handler, HandlerContext } from './base.js';

export class EchoHandler implements Handler<JsonValue, JsonValue, JsonValue> {
  async initialize(ctx: HandlerContext): Promise<DeviceInfo> {
    // Echo computes nothing, so it runs wherever it is told to; `provider: none` says no session exists.
    const device = ctx.device;
    return device.kind === 'cpu'
      ? { kind: 'cpu', id: null, provider: 'none' }
      : { kind: device.kind, id: device.id, provider: 'none' };
  }

  preprocess(item: BatchItem<JsonValue>): JsonValue {
    const body = item.body;
    if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'src_text' in body) {
      const text = body.src_text;
      if (typeof text !== 'string') throw new ServeError('BAD_REQUEST', 'src_text must be a string.');
      return { translated: text };
    }
    return body;
  }

  async inference(inputs: JsonValue[], emit: (index: number, result: JsonValue) => void): Promise<void> {
    inputs.forEach((input, index) => emit(index, input));
  }

  postprocess(output: JsonValue): JsonValue {
    return output;
  }

  async close(): Promise<void> {}
}
