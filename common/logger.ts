/**
 * @module common/logger — pino loggers for every process, one JSON line per event.
 * Request bodies are never logged unless LOG_BODIES=true.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** A logger named after its component (`router`, `model-server`, `worker`, …), writing JSON to stdout. */
export function createLogger(component: string, level = 'info', bindings: Record<string, unknown> = {}): Logger {
  return pino({ name: component, level, base: { pid: process.pid, ...bindings } });
}
