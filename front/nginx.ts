/**
 * @module front/nginx — nginx as the front: find the binary, render `nginx/nginx.conf` (a template) with the
 * configured ports, limits and paths into RUN_DIR, check it with `nginx -t`, and run it in the foreground.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Address } from '../common/config.js';
import { errorBodyText, frontErrors } from './error-pages.js';

/** Where nginx lives when it is not on PATH (Debian puts it in /usr/sbin, often not on a user's PATH). */
const EXTRA_DIRS = ['/usr/sbin', '/usr/local/sbin', '/usr/local/nginx/sbin', '/opt/homebrew/bin'];

/** The nginx executable, or undefined when none is installed. `NGINX_BIN` in `env` names one explicitly. */
export function findNginx(env: Record<string, string | undefined>): string | undefined {
  if (env.NGINX_BIN) return env.NGINX_BIN;
  const dirs = [...(env.PATH ?? '').split(path.delimiter).filter(Boolean), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = path.join(dir, 'nginx');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export interface NginxValues {
  listen: Address;
  router: Address;
  maxBodyBytes: number;
  /** proxy_read_timeout, seconds: the router's own deadline plus slack (default the seed's 86400). */
  routerTimeoutS?: number;
  runDir: string;
  logDir: string;
  /**
   * The path the front's readiness probe asks (front/main.ts), answered 204 by this config alone: a path of its own
   * per start, so that another process already holding the port is never taken for this nginx. Default `/_mt_ready`.
   */
  readyPath?: string;
}

const hostPort = (a: Address) => `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;

/**
 * Fill the template's `{{NAME}}` placeholders.
 * @throws Error naming a placeholder the template has but no value fills (a template from a newer version).
 */
export function renderNginxConfig(template: string, values: NginxValues): string {
  const errors = frontErrors(values.maxBodyBytes);
  const fill: Record<string, string> = {
    LISTEN: hostPort(values.listen),
    ROUTER: hostPort(values.router),
    MAX_BODY_BYTES: String(values.maxBodyBytes),
    ROUTER_TIMEOUT_S: String(values.routerTimeoutS ?? 86_400),
    RUN_DIR: values.runDir,
    LOG_DIR: values.logDir,
    READY_PATH: values.readyPath ?? '/_mt_ready',
  };
  for (const [status, error] of Object.entries(errors)) {
    fill[`ERROR_${status}`] = errorBodyText(error);
    fill[`CODE_${status}`] = error.code;
  }
  for (const [name, value] of Object.entries(fill)) {
    // Values land inside nginx tokens (paths unquoted, bodies in single quotes): refuse what would break them.
    const forbidden = name.startsWith('ERROR_') ? /['\\$]/ : /[\s;'"{}\\$]/;
    if (forbidden.test(value)) {
      throw new Error(`nginx config: ${name}=${JSON.stringify(value)} cannot be written into nginx.conf`);
    }
  }
  return template.replace(/\{\{([A-Z0-9_]+)\}\}/g, (_match, name: string) => {
    const value = fill[name];
    if (value === undefined) throw new Error(`nginx config: no value for placeholder {{${name}}}`);
    return value;
  });
}

export interface NginxFiles {
  /** The rendered config. */
  confPath: string;
  runDir: string;
}

/** Render `templatePath` into `runDir/nginx.conf` and create the folders it names. */
export function writeNginxConfig(templatePath: string, values: NginxValues): NginxFiles {
  mkdirSync(path.join(values.runDir, 'nginx-tmp'), { recursive: true });
  mkdirSync(values.logDir, { recursive: true });
  const confPath = path.join(values.runDir, 'nginx.conf');
  writeFileSync(confPath, renderNginxConfig(readFileSync(templatePath, 'utf8'), values));
  return { confPath, runDir: values.runDir };
}

const args = (files: NginxFiles) => ['-p', files.runDir + path.sep, '-c', files.confPath, '-e', 'stderr'];

/** `nginx -t` on the rendered config. @throws Error with nginx's own message when the config is bad. */
export function checkNginxConfig(binary: string, files: NginxFiles): void {
  const result = spawnSync(binary, ['-t', '-q', ...args(files)], { encoding: 'utf8' });
  if (result.error) throw new Error(`cannot run ${binary}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`nginx rejects ${files.confPath}:\n${result.stderr.trim()}`);
}

/**
 * Start nginx in the foreground (`daemon off` is in the template). Its stderr (the error log) is inherited, so
 * pm2 keeps it with the front's log. Stop it with SIGQUIT (graceful: finish requests) or SIGTERM (fast).
 */
export function spawnNginx(binary: string, files: NginxFiles): ChildProcess {
  return spawn(binary, args(files), { stdio: ['ignore', 'inherit', 'inherit'] });
}
