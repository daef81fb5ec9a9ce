/**
 * @module model-server/cli — `model-server archive`: write store entries (the seed's torch-model-archiver step);
 * `model-server quantize`: write a model folder's int8 files (tools/quantize.ts), no Python needed.
 *
 *     node dist/model-server/cli.js archive --model-dir models/tiny --store model_store \
 *          --setup-config setup_config.json [--handler translation] [--version 1.0]
 *     node dist/model-server/cli.js archive --model-dir models/tiny --store model_store --name echo --handler echo
 *
 * One entry per language of setup_config.json, or the `--name`d entries only (repeatable). Existing entries of
 * those names are overwritten. Flags have the same defaults as .env.example; this entry reads no .env.
 * Prints one line per written manifest; exits 2 on a usage error, 1 on any other failure.
 *
 *     node dist/model-server/cli.js quantize --model-dir models/m2m100_418M [--dtype q8|q8-rows|all]
 *
 * Writes `onnx/encoder_model_quantized.onnx` and `onnx/decoder_model_merged_quantized.onnx` (q8: transformers.js'
 * recipe) and/or the `_quantized_rows` pair (q8-rows: activations quantized per row) beside the fp32 files.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ENV_DEFAULTS, readSetupConfig } from '../common/config.js';
import { quantizeModelDir } from './tools/quantize.js';
import { archiveModels } from './tools/archiver.js';

const USAGE = `usage: model-server archive [--model-dir DIR] [--store DIR] [--setup-config FILE | --name NAME ...]
                            [--handler translation|echo] [--version 1.0]
  --model-dir     shared model folder the entries refer to (default ${ENV_DEFAULTS.MODEL_DIR})
  --store         model store to write (default ${ENV_DEFAULTS.MODEL_STORE})
  --setup-config  one entry per language of this file (default ${ENV_DEFAULTS.SETUP_CONFIG})
  --name          write only this entry (repeatable); overrides --setup-config
  --handler       handler the entries are served by (default translation)
  --version       model version (default 1.0)
       model-server quantize --model-dir DIR [--dtype q8|q8-rows|all] [--full-range]
  --dtype         q8: int8, activations per tensor (transformers.js' *_quantized.onnx; default);
                  q8-rows: activations per row (*_quantized_rows.onnx); all: both
  --full-range    8-bit weights instead of the published 7-bit (reduce_range) ones`;

const QUANTIZE_DTYPES = { q8: ['tensor'], 'q8-rows': ['row'], all: ['tensor', 'row'] } as const;

function runQuantize(rest: readonly string[], out: (line: string) => void): number {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...rest],
      options: {
        'model-dir': { type: 'string', default: ENV_DEFAULTS.MODEL_DIR },
        dtype: { type: 'string', default: 'q8' },
        'full-range': { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
    if (!Object.hasOwn(QUANTIZE_DTYPES, values.dtype))
      throw new Error(`--dtype must be q8, q8-rows or all (got ${values.dtype})`);
  } catch (err) {
    process.stderr.write(`model-server quantize: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  try {
    for (const activations of QUANTIZE_DTYPES[values.dtype as keyof typeof QUANTIZE_DTYPES]) {
      const started = performance.now();
      const reports = quantizeModelDir(values['model-dir'], { activations, reduceRange: !values['full-range'] });
      for (const r of reports) {
        const ops = Object.entries(r.quantized)
          .map(([op, n]) => `${n} ${op}`)
          .join(', ');
        out(`quantized ${r.output}: ${ops}; ${r.bytesIn} → ${r.bytesOut} bytes`);
      }
      out(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
    }
    return 0;
  } catch (err) {
    process.stderr.write(`model-server quantize: ${(err as Error).message}\n`);
    return 1;
  }
}

function runCli(argv: readonly string[], out: (line: string) => void = console.log): number {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    out(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'quantize') return runQuantize(rest, out);
  if (command !== 'archive') {
    process.stderr.write(`model-server: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
    return 2;
  }
  let values;
  try {
    ({ values } = parseArgs({
      args: [...rest],
      options: {
        'model-dir': { type: 'string', default: ENV_DEFAULTS.MODEL_DIR },
        store: { type: 'string', default: ENV_DEFAULTS.MODEL_STORE },
        'setup-config': { type: 'string', default: ENV_DEFAULTS.SETUP_CONFIG },
        name: { type: 'string', multiple: true },
        handler: { type: 'string', default: 'translation' },
        version: { type: 'string', default: '1.0' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`model-server archive: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  try {
    const names = values.name ?? Object.keys(readSetupConfig(path.resolve(values['setup-config'])).cuda_id);
    const files = archiveModels({
      modelDir: values['model-dir'],
      store: values.store,
      names,
      handler: values.handler,
      version: values.version,
    });
    for (const file of files) out(`archived ${file}`);
    return 0;
  } catch (err) {
    process.stderr.write(`model-server archive: ${(err as Error).message}\n`);
    return 1;
  }
}

process.exitCode = runCli(process.argv.slice(2));
