import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveEntry } from '../../common/entry.js';
import '../../harness/compiled.js';
import { makeDemoModel } from '../tools/demo-model/index.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const root = mkdtempSync(path.join(tmpdir(), 'ort-env-'));
const modelDir = path.join(root, 'tiny');
/** The engine's module: from dist/ when the build is current (harness/compiled.ts), else through tsx. */
const ENGINE = resolveEntry(import.meta.url, './engine');

/** Variables onnxruntime reads as "running in CI" (then it suppresses telemetry by itself). */
const CI_VARIABLES = [
  'CI',
  'TF_BUILD',
  'GITHUB_ACTIONS',
  'GITLAB_CI',
  'CIRCLECI',
  'TRAVIS',
  'JENKINS_URL',
  'CODEBUILD_BUILD_ID',
  'BUILDKITE',
  'TEAMCITY_VERSION',
  'APPVEYOR',
];

/**
 * Load the engine in a fresh process (onnxruntime initialises once per process) with `telemetry` as
 * ORT_DISABLE_TELEMETRY (undefined: not set), outside any CI; returns the log onnxruntime's telemetry uploader
 * left behind, if any. Only a log written since the process started counts: other onnxruntime processes (the
 * transformers.js baseline's, in this same run) leave theirs in /tmp too, and a pid is reused.
 */
function telemetryLogOfEngineProcess(telemetry: string | undefined): string | undefined {
  const env = { ...process.env };
  for (const name of [...CI_VARIABLES, 'ORT_DISABLE_TELEMETRY']) delete env[name];
  if (telemetry !== undefined) env.ORT_DISABLE_TELEMETRY = telemetry;
  const script = `
    const { TranslationEngine } = await import(${JSON.stringify(ENGINE.file)});
    const engine = await TranslationEngine.load({ modelDir: ${JSON.stringify(modelDir)}, intraOpThreads: 1 });
    await engine.close();
    process.stdout.write(String(process.pid));`;
  const startedMs = Date.now();
  const pid = execFileSync(process.execPath, [...ENGINE.execArgv, '--input-type=module', '-e', script], {
    cwd: repo,
    env,
    encoding: 'utf8',
  }).trim();
  expect(pid).toMatch(/^\d+$/);
  return [tmpdir(), '/tmp']
    .map((dir) => path.join(dir, `mat-debug-${pid}.log`))
    .find((file) => existsSync(file) && statSync(file).mtimeMs >= startedMs - 1_000);
}

describe('onnxruntime environment (ort-env.ts)', () => {
  beforeAll(() => makeDemoModel('tiny', modelDir));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('the engine turns onnxruntime telemetry off before onnxruntime initialises; an operator can turn it back on', () => {
    // With the operator's ORT_DISABLE_TELEMETRY=0 kept, onnxruntime 1.30 starts its uploader, which logs here
    // (offline, failed uploads): the evidence the opt-out below is what prevents it.
    const control = telemetryLogOfEngineProcess('0');
    expect(control, 'onnxruntime no longer writes mat-debug-<pid>.log: find another witness').toBeDefined();
    rmSync(control!, { force: true });
    expect(telemetryLogOfEngineProcess(undefined)).toBeUndefined();
  });
});
