/**
 * @module bench/probe — child entry for one in-process measurement, run by `runProbe` in a fresh process.
 *
 * `node --import tsx bench/probe.ts <resultFile> <requestJson>`; writes the result as JSON to resultFile and
 * exits 0, or prints the error and exits 1. Kinds:
 * - `matmul`: onnxruntime MatMul GFLOP/s on weight shapes × row counts (the machine's ceiling);
 * - `engine`: the translation engine on pre-formed batches (see bench/scenarios/engine-probe.ts);
 * - `layout`: two engines, inline weights and external data, calls interleaved (bench/scenarios/engine-layout.ts).
 */
import { writeFileSync } from 'node:fs';
import { measureMatmuls, type MatmulProbeRequest } from './lib/matmul-ceiling.js';
import { runEngineProbe, type EngineProbeRequest } from './scenarios/engine-probe.js';
import { runLayoutProbe, type LayoutProbeRequest } from './scenarios/engine-layout.js';

type ProbeRequest = MatmulProbeRequest | EngineProbeRequest | LayoutProbeRequest;

const [resultFile, requestJson] = process.argv.slice(2);
if (!resultFile || !requestJson) {
  process.stderr.write('usage: probe.ts <resultFile> <requestJson>\n');
  process.exit(2);
}

try {
  const request = JSON.parse(requestJson) as ProbeRequest;
  let result: unknown;
  switch (request.kind) {
    case 'matmul':
      result = [];
      for (const group of request.groups)
        (result as unknown[]).push(...(await measureMatmuls(group.cases, group.rows, request)));
      break;
    case 'engine':
      result = await runEngineProbe(request);
      break;
    case 'layout':
      result = await runLayoutProbe(request, (line) => process.stderr.write(`${line}\n`));
      break;
    default:
      throw new Error(`unknown probe kind ${JSON.stringify((request as { kind: unknown }).kind)}`);
  }
  writeFileSync(resultFile, JSON.stringify(result));
  process.exit(0);
} catch (err) {
  process.stderr.write(`probe failed: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
}
