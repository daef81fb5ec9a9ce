/**
 * @module worker/handlers/index — handlers by name, as chosen at registration (`handler=` or the manifest).
 * Each is imported only when a worker asks for it, so an echo worker never loads onnxruntime.
 */
import { ServeError } from '../../../common/errors.js';
import type { Handler } from './base.js';

const HANDLERS: Readonly<Record<string, () => Promise<Handler>>> = {
  echo: async () => new (await import('./echo.js')).EchoHandler(),
  translation: async () => new (await import('./translation.js')).TranslationHandler(),
};

/** Names a registration may use. */
export const HANDLER_NAMES: readonly string[] = Object.freeze(Object.keys(HANDLERS));

export function isHandlerName(name: string): boolean {
  return Object.hasOwn(HANDLERS, name);
}

/** A fresh instance of the named handler. @throws ServeError BAD_REQUEST for an unknown name. */
export async function createHandler(name: string): Promise<Handler> {
  const load = Object.hasOwn(HANDLERS, name) ? HANDLERS[name] : undefined;
  if (load === undefined) {
    throw new ServeError('BAD_REQUEST', `Unknown handler: ${name}. Known handlers: ${HANDLER_NAMES.join(', ')}.`);
  }
  return load();
}
