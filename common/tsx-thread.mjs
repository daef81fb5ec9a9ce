/**
 * @module common/tsx-thread — a worker thread's entry when mt-serve runs from source (vitest, tsx): registers tsx's
 * hooks in this thread, which `--import tsx` in a worker's execArgv does not, then loads the TypeScript module that
 * piscina's `workerData.tsxThreadModule` names and re-exports its default export (common/entry.ts
 * `resolveThreadEntry`). Compiled runs load the module's `.js` directly and never read this file.
 */
import { workerData } from 'piscina';
import { register } from 'tsx/esm/api';

register();
const loaded = await import(workerData.tsxThreadModule);

export default loaded.default;
