import { pino } from 'pino';
import { expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { databaseProxy } from '../helpers/database-proxy.js';
import { eventually } from '../helpers/receiver.js';
import { startTestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

it(
  '/healthz turns 503 while the database is unreachable and 200 again when it returns',
  { timeout: 90_000 },
  async () => {
    const proxy = await databaseProxy(new URL(db.url));
    const port = await freePort();
    const running = await startTestService(proxy.url, 'assetUpdater:\n  intervalSeconds: 1\n  webhooks: []\n', {
      logger: pino({ level: 'silent' }),
      httpPort: port,
    });
    const health = async (): Promise<{ status: number; body: { status: string; reason?: string } }> => {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      return { status: response.status, body: (await response.json()) as { status: string; reason?: string } };
    };
    try {
      expect(await health()).toEqual({ status: 200, body: { status: 'ok' } });
      proxy.down();
      const down = await eventually(
        async () => {
          const result = await health();
          return result.status === 503 ? result : undefined;
        },
        { timeoutMs: 20_000, what: '/healthz to report 503' },
      );
      expect(down.body.status).toBe('unavailable');
      expect(down.body.reason).toMatch(/database not answering/);
      proxy.up();
      await eventually(async () => ((await health()).status === 200 ? true : undefined), {
        timeoutMs: 30_000,
        what: '/healthz to return to 200',
      });
    } finally {
      proxy.up();
      await running.stop();
      await proxy.close();
    }
  },
);

it(
  "/livez answers while the process runs; /readyz and /healthz turn 503 while coalescing fails (the binding's view is gone)",
  { timeout: 90_000 },
  async () => {
    const port = await freePort();
    const running = await startTestService(db.url, 'assetUpdater:\n  intervalSeconds: 1\n  webhooks: []\n', {
      logger: pino({ level: 'silent' }),
      httpPort: port,
    });
    const get = async (
      path: string,
    ): Promise<{ status: number; body: { status: string; check?: string; reason?: string } }> => {
      const response = await fetch(`http://127.0.0.1:${port}${path}`);
      return {
        status: response.status,
        body: (await response.json()) as { status: string; check?: string; reason?: string },
      };
    };
    try {
      await db.pool.query('insert into assets (asset_id) values (1)');
      await eventually(async () => ((await get('/readyz')).status === 200 ? true : undefined), {
        timeoutMs: 20_000,
        what: '/readyz to answer 200',
      });
      await db.pool.query('drop view asset_webhooks.asset_state cascade');
      await db.pool.query('insert into assets (asset_id) values (2)');
      const failing = await eventually(
        async () => {
          const result = await get('/readyz');
          return result.status === 503 ? result : undefined;
        },
        { timeoutMs: 20_000, what: '/readyz to report 503' },
      );
      expect(failing.body).toMatchObject({
        status: 'unavailable',
        check: 'coalescing',
        reason: expect.stringMatching(/^the last coalescing run failed: .*asset_state/),
      });
      expect((await get('/healthz')).status).toBe(503);
      expect(await get('/livez')).toEqual({ status: 200, body: { status: 'ok' } });
    } finally {
      await running.stop();
    }
  },
);
