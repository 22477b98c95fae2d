import { createServer, type Server } from 'node:http';
import type pg from 'pg';
import type { ServiceMetrics } from './metrics.js';

export interface HealthSource {
  readonly pool: pg.Pool;
  /** Whether the worker is running (false once it stopped or crashed). */
  workerRunning(): boolean;
}

/**
 * GET /healthz: 200 while the database answers and the worker runs, else 503,
 * with a short JSON reason. GET /metrics: Prometheus text format.
 */
export function startHttpServer(port: number, health: HealthSource, metrics: ServiceMetrics, host = '0.0.0.0'): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/healthz') {
      void checkHealth(health).then((reason) => {
        response.writeHead(reason === null ? 200 : 503, { 'content-type': 'application/json' });
        response.end(JSON.stringify(reason === null ? { status: 'ok' } : { status: 'unavailable', reason }));
      });
    } else if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) => response.writeHead(503, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${error instanceof Error ? error.message : String(error)}\n`),
      );
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try /healthz or /metrics\n');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

async function checkHealth(health: HealthSource): Promise<string | null> {
  if (!health.workerRunning()) return 'worker not running';
  try {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out after 2s')), 2000).unref());
    await Promise.race([health.pool.query('select 1'), timeout]);
    return null;
  } catch (error) {
    return `database not answering: ${error instanceof Error ? error.message : String(error)}`;
  }
}
