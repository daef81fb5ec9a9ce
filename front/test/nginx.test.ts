/** Rendering nginx/nginx.conf: every placeholder filled, unsafe values refused, the result accepted by `nginx -t`. */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { errorBodyText, frontErrors } from '../error-pages.js';
import { checkNginxConfig, findNginx, renderNginxConfig, writeNginxConfig, type NginxValues } from '../nginx.js';
import { ROOT } from '../../test/support/processes.js';

const template = readFileSync(path.join(ROOT, 'nginx/nginx.conf'), 'utf8');
const values: NginxValues = {
  listen: { host: '0.0.0.0', port: 7777 },
  router: { host: '127.0.0.1', port: 8888 },
  maxBodyBytes: 1048576,
  runDir: '/srv/mt/run',
  logDir: '/srv/mt/logs',
};

describe('nginx config', () => {
  it('fills every placeholder with the configured values and the shared error bodies', () => {
    const conf = renderNginxConfig(template, values);
    expect(conf).not.toMatch(/\{\{/);
    expect(conf).toContain('listen 0.0.0.0:7777;');
    expect(conf).toContain('server 127.0.0.1:8888 max_fails=0;');
    expect(conf).toContain('client_max_body_size 1048576;');
    expect(conf).toContain('pid /srv/mt/run/nginx.pid;');
    expect(conf).toContain('access_log /srv/mt/logs/nginx-access.log mt_json;');
    expect(conf).toContain(`return 502 '${errorBodyText(frontErrors(1048576)[502])}';`);
    expect(conf).toContain('server_tokens off;');
    expect(conf).toContain('proxy_http_version 1.1;');
    expect(conf).toContain('proxy_set_header Connection "";');
  });

  it('writes IPv6 addresses in brackets', () => {
    const conf = renderNginxConfig(template, { ...values, listen: { host: '::', port: 7000 } });
    expect(conf).toContain('listen [::]:7000;');
  });

  it('refuses a value that would break the config, and a placeholder it cannot fill', () => {
    expect(() => renderNginxConfig(template, { ...values, runDir: '/srv/my run' })).toThrow(
      'nginx config: RUN_DIR="/srv/my run" cannot be written into nginx.conf',
    );
    expect(() => renderNginxConfig('listen {{PORT}};', values)).toThrow(
      'nginx config: no value for placeholder {{PORT}}',
    );
  });

  const nginx = findNginx(process.env);
  it.skipIf(!nginx)('renders a config that nginx -t accepts', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nginx-conf-'));
    try {
      const files = writeNginxConfig(path.join(ROOT, 'nginx/nginx.conf'), {
        ...values,
        runDir: path.join(dir, 'run'),
        logDir: path.join(dir, 'logs'),
      });
      expect(() => checkNginxConfig(nginx!, files)).not.toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
