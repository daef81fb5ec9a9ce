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
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ENV_DEFAULTS, readSetupConfig } from '../common/config.js';
import { quantizeModelDir } from './tools/quantize.js';
import { archiveModels, archiveSetupConfig } from './tools/archiver.js';

const USAGE = `usage: model-server archive [--model-dir DIR] [--store DIR] [--setup-config FILE | --name NAME ...]
                            [--handler translation|echo] [--version 1.0]
  --model-dir     shared model folder the entries refer to (default ${ENV_DEFAULTS.MODEL_DIR})
  --store         model store to write (default ${ENV_DEFAULTS.MODEL_STORE})
  --setup-config  one entry per language of this file, and one per pair of its "pairs" with that pair's model_dir
                  (default ${ENV_DEFAULTS.SETUP_CONFIG})
  --name          write only this entry (repeatable); overrides --setup-config
  --handler       handler the entries are served by (default translation)
  --version       model version (default 1.0)
       model-server quantize --model-dir DIR [--dtype q8|q8-rows|all] [--full-range]
  --dtype         q8: int8, activations per tensor (transformers.js' *_quantized.onnx; default);
                  q8-rows: activations per row (*_quantized_rows.onnx); all: both
  --full-range    8-bit weights instead of the published 7-bit (reduce_range) ones`;

const QUANTIZE_DTYPES = { q8: ['tensor'], 'q8-rows': ['row'], all: ['tensor', 'row'] } as const;

/** A subcommand's flags, strictly: an unknown flag or a bad value throws. */
const flags = <const O extends NonNullable<ParseArgsConfig['options']>>(rest: readonly string[], options: O) =>
  parseArgs({ args: [...rest], options, strict: true, allowPositionals: false }).values;

/** One subcommand: `parse` reads its flags (a throw: exit 2 with the usage), `act` does the work (a throw: exit 1). */
function subcommand<T>(command: string, parse: () => T, act: (values: T) => void): number {
  let values: T;
  try {
    values = parse();
  } catch (err) {
    process.stderr.write(`model-server ${command}: ${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  try {
    act(values);
    return 0;
  } catch (err) {
    process.stderr.write(`model-server ${command}: ${(err as Error).message}\n`);
    return 1;
  }
}

function runQuantize(rest: readonly string[], out: (line: string) => void): number {
  const parse = () => {
    const values = flags(rest, {
      'model-dir': { type: 'string', default: ENV_DEFAULTS.MODEL_DIR },
      dtype: { type: 'string', default: 'q8' },
      'full-range': { type: 'boolean', default: false },
    });
    if (!Object.hasOwn(QUANTIZE_DTYPES, values.dtype))
      throw new Error(`--dtype must be q8, q8-rows or all (got ${values.dtype})`);
    return values;
  };
  return subcommand('quantize', parse, (values) => {
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
  });
}

function runArchive(rest: readonly string[], out: (line: string) => void): number {
  const parse = () =>
    flags(rest, {
      'model-dir': { type: 'string', default: ENV_DEFAULTS.MODEL_DIR },
      store: { type: 'string', default: ENV_DEFAULTS.MODEL_STORE },
      'setup-config': { type: 'string', default: ENV_DEFAULTS.SETUP_CONFIG },
      name: { type: 'string', multiple: true },
      handler: { type: 'string', default: 'translation' },
      version: { type: 'string', default: '1.0' },
    });
  return subcommand('archive', parse, (values) => {
    const options = {
      modelDir: values['model-dir'],
      store: values.store,
      handler: values.handler,
      version: values.version,
    };
    const files =
      values.name === undefined
        ? archiveSetupConfig(readSetupConfig(path.resolve(values['setup-config'])), options)
        : archiveModels({ ...options, names: values.name });
    for (const file of files) out(`archived ${file}`);
  });
}

function runCli(argv: readonly string[], out: (line: string) => void = console.log): number {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    out(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'quantize') return runQuantize(rest, out);
  if (command === 'archive') return runArchive(rest, out);
  process.stderr.write(`model-server: unknown command ${JSON.stringify(command)}\n${USAGE}\n`);
  return 2;
}

process.exitCode = runCli(process.argv.slice(2));
