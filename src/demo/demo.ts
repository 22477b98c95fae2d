import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { createPool } from '../db/connect.js';
import { startEmbeddedPostgres } from '../embedded/embedded-postgres.js';
import { migrate } from '../migrate/migrate.js';
import { startService } from '../service/service.js';
import { DemoActivity } from './activity.js';
import { readDashboard, renderDashboard } from './dashboard.js';
import { startReceiver } from './receivers.js';

export interface DemoOptions {
  /** End by itself after this many seconds; undefined = until Ctrl-C. */
  readonly durationSeconds?: number | undefined;
  readonly out?: NodeJS.WriteStream;
}

/**
 * The whole service on an embedded PostgreSQL: the reference schema, two local
 * receivers (one reliable, one that fails now and then), simulated activity, a
 * two-second interval, and a live view. Everything is removed on exit.
 */
export async function runDemo(options: DemoOptions): Promise<void> {
  const out = options.out ?? process.stdout;
  out.write('starting an embedded PostgreSQL...\n');
  const server = await startEmbeddedPostgres();
  const cleanups: Array<() => Promise<void>> = [() => server.stop()];
  const cleanup = async (): Promise<void> => {
    for (const step of cleanups.reverse()) await step().catch(() => {});
  };
  try {
    const databaseUrl = server.url;
    const pool = createPool(databaseUrl, { max: 4, applicationName: 'asset-webhooks demo' });
    cleanups.push(() => pool.end());
    await migrate(pool, databaseUrl, { binding: 'reference' });

    const crm = await startReceiver('crm', () => 200);
    // Every 7th request fails with 503 (retried); the 8th is refused with 400 (a dead letter).
    const shop = await startReceiver('shop', (n) => (n === 8 ? 400 : n % 7 === 0 ? 503 : 200));
    cleanups.push(() => crm.close(), () => shop.close());

    const configPath = path.join(server.directory, 'demo-config.yaml');
    writeFileSync(configPath, demoConfig(crm.url, shop.url));
    const logPath = path.join(server.directory, 'service.log');
    const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination({ dest: logPath, sync: false }));
    const service = await startService({ databaseUrl, configPath, logger, concurrency: 4 });
    cleanups.push(() => service.stop());

    const activity = new DemoActivity(pool);
    activity.start(250);
    cleanups.push(() => activity.stop());

    const started = Date.now();
    const interactive = out.isTTY === true;
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        clearInterval(timer);
        process.removeListener('SIGINT', finish);
        process.removeListener('SIGTERM', finish);
        resolve();
      };
      const draw = async (): Promise<void> => {
        const elapsed = Math.round((Date.now() - started) / 1000);
        const lines = renderDashboard(await readDashboard(pool), elapsed, databaseUrl);
        out.write(interactive ? `\x1b[H\x1b[2J${lines.join('\n')}\n` : `${lines.slice(0, 3 + 3).join('\n')}\n\n`);
        if (options.durationSeconds !== undefined && elapsed >= options.durationSeconds) finish();
      };
      const timer = setInterval(() => void draw().catch(() => {}), interactive ? 1000 : 5000);
      process.once('SIGINT', finish);
      process.once('SIGTERM', finish);
    });
    const final = await readDashboard(pool);
    out.write(`\nstopping. receivers got: crm ${crm.stats.events} events in ${crm.stats.accepted} payloads, shop ${shop.stats.events} events in ${shop.stats.accepted} payloads (${shop.stats.requests - shop.stats.accepted} refused)\n`);
    out.write(`dead letters: ${final.rows.reduce((n, row) => n + row.deadLetters, 0)}\n`);
  } finally {
    await cleanup();
    out.write('demo database removed.\n');
  }
}

function demoConfig(crmUrl: string, shopUrl: string): string {
  return `# Written by the demo. The receivers run on this machine, hence allowPrivateAddresses.
assetUpdater:
  intervalSeconds: 2
  network:
    allowPrivateAddresses: true
  retry:
    delaysSeconds: [1, 2, 4]
  webhooks:
    - id: crm
      url: ${crmUrl}
      enabled: true
      resourceTypes: [Resource, Project]
    - id: shop
      url: ${shopUrl}
      enabled: true
      batchSize: 10
      eventTypes: [Created, Edited, Purged, Reversion]
      filters:
        - filterKind: keywords
          condition: ANY
          value: [summer, winter, product]
`;
}
