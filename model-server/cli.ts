/**
 * @module model-server/cli — `model-server archive`: write store entries (the seed's torch-model-archiver step).
 *
 *     node dist/model-server/cli.js archive --model-dir models/tiny --store model_store \
 *          --setup-config setup_config.json [--handler translation] [--version 1.0]
 *     node dist/model-server/cli.js archive --model-dir models/tiny --store model_store --name echo --handler echo
 *
 * One entry per language of setup_config.json, or the `--name`d entries only (repeatable). Existing entries of
 * those names are overwritten. Flags have the same defaults as .env.example; this entry reads no .env.
 * Prints one line per written manifest; exits 2 on a usage error, 1 on any other failure.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ENV_DEFAULTS, readSetupConfig } from '../common/config.js';
import { archiveModels } from './store/archiver.js';

const USAGE = `usage: model-server archive [--model-dir DIR] [--store DIR] [--setup-config FILE | --name NAME ...]
                            [--handler translation|echo] [--version 1.0]
  --model-dir     shared model folder the entries refer to (default ${ENV_DEFAULTS.MODEL_DIR})
  --store         model store to write (default ${ENV_DEFAULTS.MODEL_STORE})
  --setup-config  one entry per language of this file (default ${ENV_DEFAULTS.SETUP_CONFIG})
  --name          write only this entry (repeatable); overrides --setup-config
  --handler       handler the entries are served by (default translation)
  --version       model version (default 1.0)`;

function runCli(argv: readonly string[], out: (line: string) => void = console.log): number {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    out(USAGE);
    return command === undefined ? 2 : 0;
  }
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
