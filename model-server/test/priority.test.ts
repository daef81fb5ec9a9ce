import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { WORKER_NICENESS } from '../http/server.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';

/** The nice value of a process (field 19 of /proc/PID/stat, after the parenthesised command name). */
function niceOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

describe('worker scheduling priority', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('workers run below the frontend, so an engine saturating the cores cannot delay the HTTP side', async () => {
    t = await startTestServer();
    expect((await call(`${t.management}/models?url=echo`, { method: 'POST' })).status).toBe(200);
    const [worker] = (await call(`${t.management}/models/echo`)).body[0].workers as { pid: number }[];
    expect(niceOf(worker!.pid)).toBe(niceOf(process.pid) + WORKER_NICENESS);
  });
});
