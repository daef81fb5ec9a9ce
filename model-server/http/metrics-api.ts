/**
 * @module model-server/http/metrics-api — the metrics port (TorchServe's :8082): `GET /metrics` in Prometheus
 * text, optionally only the families named by `name[]` (as TorchServe filters), `GET /status.json` (status.ts: what
 * the status page and gpu-watch show), and `OPTIONS /`.
 * Built by a factory; it never listens.
 */
import { Hono } from 'hono';
import { installCommon, methodNotAllowed, type AppEnv, type CommonOptions } from './error-handler.js';
import type { ServerMetrics } from '../wlm/metrics.js';
import { METRICS_OPENAPI } from './openapi.js';
import type { ServerStatus } from '../translation/status.js';

/** No token: the metrics port asks for none. */
export interface MetricsApiDeps extends Pick<CommonOptions, 'log' | 'maxBodyBytes'> {
  metrics: ServerMetrics;
  /** The status document; absent: `/status.json` is not served. */
  status?: () => Promise<ServerStatus>;
}

export function createMetricsApp(deps: MetricsApiDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  installCommon(app, deps);
  const { metrics } = deps;

  app.options('/', (c) => c.json(METRICS_OPENAPI));
  app.get('/metrics', async (c) => {
    const names = c.req.queries('name[]') ?? [];
    const text =
      names.length === 0
        ? await metrics.render()
        : (
            await Promise.all(
              names
                .filter((name) => metrics.registry.getSingleMetric(name) !== undefined)
                .map((name) => metrics.registry.getSingleMetricAsString(name)),
            )
          ).join('\n');
    return c.body(text, 200, { 'content-type': metrics.contentType });
  });

  const status = deps.status;
  if (status !== undefined) {
    app.get('/status.json', async (c) => c.json(await status(), 200, { 'cache-control': 'no-store' }));
    app.all('/status.json', methodNotAllowed);
  }

  app.all('/', methodNotAllowed);
  app.all('/metrics', methodNotAllowed);
  return app;
}
