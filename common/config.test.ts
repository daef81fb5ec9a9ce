import { readFileSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, ENV_DEFAULTS, loadConfig, readEnv, readSetupConfig } from './config.js';

const root = path.resolve(import.meta.dirname, '..');

/** `NAME=value` lines of .env.example (comments and blanks skipped). */
function exampleEntries(): Map<string, string> {
  const text = readFileSync(path.join(root, '.env.example'), 'utf8');
  const entries = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) entries.set(m[1]!, m[2]!);
  }
  return entries;
}

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env, root);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  return [];
}

describe('config', () => {
  it('.env.example documents exactly ENV_DEFAULTS, with the same default values', () => {
    const example = exampleEntries();
    expect([...example.keys()].sort()).toEqual(Object.keys(ENV_DEFAULTS).sort());
    for (const [name, value] of example) expect(value, name).toBe(ENV_DEFAULTS[name as keyof typeof ENV_DEFAULTS]);
  });

  it('the defaults are a valid configuration with the seed’s values', () => {
    const c = loadConfig({}, root);
    expect(c.modelServer.inference).toEqual({ host: '127.0.0.1', port: 9999 });
    expect(c.modelServer.management).toEqual({ host: '127.0.0.1', port: 8081 });
    expect(c.modelServer.metrics).toEqual({ host: '127.0.0.1', port: 8082 });
    expect(c.modelServer.jobQueueSize).toBe(4096);
    expect(c.modelServer.defaultBatchSize).toBe(64);
    expect(c.modelServer.defaultMaxBatchDelayMs).toBe(100);
    expect(c.modelServer.batchPolicy).toBe('immediate');
    expect(c.modelServer.modelStore).toBe(path.join(root, 'model_store'));
    expect(Object.isFrozen(c) && Object.isFrozen(c.modelServer) && Object.isFrozen(c.modelServer.inference)).toBe(true);
  });

  it.each([
    ['JOB_QUEUE_SIZE', '0'],
    ['JOB_QUEUE_SIZE', 'many'],
    ['BATCH_SIZE', '1.5'],
    ['MAX_BATCH_DELAY_MS', '-1'],
    ['INFERENCE_ADDRESS', 'localhost'],
    ['MANAGEMENT_ADDRESS', '127.0.0.1:70000'],
    ['BATCH_POLICY', 'greedy'],
    ['ENGINE_SHARING', 'gpu'],
    ['TOKEN_AUTH', 'maybe'],
    ['MAX_REQUEST_SIZE', '10'],
    ['LOG_LEVEL', 'verbose'],
  ])('a bad %s=%s stops the start with a message naming the variable', (name, value) => {
    const problems = problemsOf({ [name]: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`${name}=${JSON.stringify(value)}`);
  });

  it('reports every bad variable at once', () => {
    const problems = problemsOf({ BATCH_SIZE: '0', RESPONSE_TIMEOUT_S: 'x', FRONT: 'apache' });
    expect(problems.map((p) => p.split('=')[0]).sort()).toEqual(['BATCH_SIZE', 'FRONT', 'RESPONSE_TIMEOUT_S']);
  });

  it('accepts both address forms, and port 0 (tests bind a free port)', () => {
    const c = loadConfig({ INFERENCE_ADDRESS: '0.0.0.0:0', MANAGEMENT_ADDRESS: 'http://[::1]:8081' }, root);
    expect(c.modelServer.inference).toEqual({ host: '0.0.0.0', port: 0 });
    expect(c.modelServer.management).toEqual({ host: '::1', port: 8081 });
  });

  it('readEnv: .env under the process environment; empty values take the default', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-env-'));
    try {
      writeFileSync(path.join(dir, '.env'), 'BATCH_SIZE=8\nJOB_QUEUE_SIZE=16\nNUM_BEAMS=\n');
      const env = readEnv(dir, { JOB_QUEUE_SIZE: '32' });
      const c = loadConfig(env, dir);
      expect(c.modelServer.defaultBatchSize).toBe(8);
      expect(c.modelServer.jobQueueSize).toBe(32);
      expect(c.modelServer.numBeams).toBe(Number(ENV_DEFAULTS.NUM_BEAMS));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('readSetupConfig reads the seed’s file and names a bad entry', () => {
    expect(Object.keys(readSetupConfig(path.join(root, 'setup_config.json')).cuda_id)).toHaveLength(14);
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-setup-'));
    try {
      const file = path.join(dir, 'setup_config.json');
      writeFileSync(file, JSON.stringify({ cuda_id: { ko: 'zero' } }));
      expect(() => readSetupConfig(file)).toThrow(/cuda_id\.ko: device ids are digit strings/);
      writeFileSync(file, '{');
      expect(() => readSetupConfig(file)).toThrow(/SETUP_CONFIG=.*cannot read JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
