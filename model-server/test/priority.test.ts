import { describe, expect, it } from 'vitest';
import { WORKER_NICENESS } from '../http/server.js';
import { call } from '../../harness/http.js';
import { niceOf } from '../../harness/proc-tree.js';
import { startPerTest, type TestServer } from '../../harness/model-server.js';

describe('worker scheduling priority', () => {
  let t: TestServer | undefined;
  const startServer = startPerTest();

  it('workers run below the frontend, so an engine saturating the cores cannot delay the HTTP side', async () => {
    t = await startServer();
    expect((await call(`${t.management}/models?url=echo`, { method: 'POST' })).status).toBe(200);
    const [worker] = (await call(`${t.management}/models/echo`)).body[0].workers as { pid: number }[];
    expect(niceOf(worker!.pid)).toBe(niceOf(process.pid) + WORKER_NICENESS);
  });
});
