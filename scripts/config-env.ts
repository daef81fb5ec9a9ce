/**
 * @module scripts/config-env — the resolved configuration as shell assignments, so the shell scripts
 * (start.sh, stop.sh) see exactly what the processes see (common/config.ts: defaults < .env < environment)
 * instead of parsing .env themselves:
 *
 *     eval "$(node dist/scripts/config-env.js)"   # → MT_MODEL_STORE='/abs/model_store' MT_LANGUAGES='ko en …' …
 *
 * Every value is single-quoted for the shell. A bad configuration prints the variables at fault to stderr
 * and exits 2, so `eval "$(…)" || exit` stops the script with that message.
 */
import { ConfigError, loadConfig, localUrl, readEnv, readSetupConfig, type Config } from '../common/config.js';
import { entriesOf } from '../common/config/setup-config.js';

/** Shell-quote one value: 'it'\''s'. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The variables the scripts use, from a loaded config and the languages of setup_config.json. */
export function configVariables(config: Readonly<Config>, languages: readonly string[]): Record<string, string> {
  const ms = config.modelServer;
  return {
    MT_ROOT: config.root,
    MT_LOG_DIR: config.logDir,
    MT_RUN_DIR: config.runDir,
    MT_MODEL_STORE: ms.modelStore,
    MT_MODEL_DIR: ms.modelDir,
    MT_MODEL_DTYPE: ms.modelDtype,
    MT_SETUP_CONFIG: ms.setupConfigPath,
    MT_LANGUAGES: languages.join(' '),
    MT_INFERENCE_URL: localUrl(ms.inference),
    MT_MANAGEMENT_URL: localUrl(ms.management),
    MT_METRICS_URL: localUrl(ms.metrics),
    MT_ROUTER_URL: localUrl(config.router.address),
    MT_MODEL_SERVERS: config.router.modelServers.join(' '),
    MT_FRONT_URL: localUrl({ host: config.front.host, port: config.front.port }),
    MT_FRONT: config.front.kind,
    MT_ROUTER_INSTANCES: String(config.router.instances),
    MT_BATCH_SIZE: String(ms.defaultBatchSize),
    MT_MAX_BATCH_DELAY_MS: String(ms.defaultMaxBatchDelayMs),
    MT_RESPONSE_TIMEOUT_S: String(ms.defaultResponseTimeoutS),
    MT_TOKEN_AUTH: String(ms.tokenAuth),
    MT_KEY_FILE: ms.keyFile,
  };
}

function main(): number {
  const root = process.cwd();
  try {
    const config = loadConfig(readEnv(root), root);
    // Every store entry: the languages, and the pairs with a model of their own (registered alike).
    const languages = entriesOf(readSetupConfig(config.modelServer.setupConfigPath));
    const lines = Object.entries(configVariables(config, languages)).map(([k, v]) => `${k}=${shellQuote(v)}`);
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
}

process.exitCode = main();
