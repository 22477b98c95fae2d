import { createServer, type Server } from 'node:http';
import type { ServiceMetrics } from './metrics.js';
import { checkReadiness, type ReadinessSource } from './readiness.js';

/**
 * GET /livez: 200 while the process runs. GET /readyz (and /healthz, its
 * older name): 200 when the service is ready (see checkReadiness), else 503
 * with a JSON reason. GET /metrics: Prometheus text format.
 */
export function startHttpServer(
  port: number,
  health: ReadinessSource,
  metrics: ServiceMetrics,
  host = '0.0.0.0',
): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/livez') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok' }));
    } else if (path === '/readyz' || path === '/healthz') {
      void checkReadiness(health).then((notReady) => {
        response.writeHead(notReady === null ? 200 : 503, { 'content-type': 'application/json' });
        response.end(JSON.stringify(notReady === null ? { status: 'ok' } : { status: 'unavailable', ...notReady }));
      });
    } else if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) =>
          response
            .writeHead(503, { 'content-type': 'text/plain' })
            .end(`metrics unavailable: ${error instanceof Error ? error.message : String(error)}\n`),
      );
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /livez, /readyz or /metrics\n');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}
