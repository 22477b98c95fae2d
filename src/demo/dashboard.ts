import type pg from 'pg';

export interface DashboardRow {
  readonly webhook: string;
  readonly delivered: number;
  readonly pending: number;
  readonly retries: number;
  readonly deadLetters: number;
  readonly eventsDelivered: number;
}

export interface DashboardSnapshot {
  readonly captured: number;
  readonly waiting: number;
  readonly rows: readonly DashboardRow[];
  readonly lastEventId: string | null;
  /** The asset of that event (for `explain`). */
  readonly lastAssetId: number | null;
}

/** Reads what the demo shows, from the service's own tables (what an operator would query). */
export async function readDashboard(pool: pg.Pool): Promise<DashboardSnapshot> {
  const [{ rows: counts }, { rows }, { rows: last }] = await Promise.all([
    pool.query<{ captured: number; waiting: number }>(
      `select (select count(*) from asset_webhooks.events)::int + (select count(*) from asset_webhooks.outbox)::int as captured,
              (select count(*) from asset_webhooks.outbox)::int as waiting`,
    ),
    pool.query<{ webhook: string; delivered: number; pending: number; retries: number; dead: number; events: number }>(
      `select w.webhook_id as webhook,
              count(*) filter (where p.status = 'delivered')::int as delivered,
              count(*) filter (where p.status in ('open', 'pending'))::int as pending,
              coalesce(sum(greatest(p.attempts - 1, 0)), 0)::int as retries,
              count(*) filter (where p.status = 'dead_lettered')::int as dead,
              coalesce(sum(p.event_count) filter (where p.status = 'delivered'), 0)::int as events
       from asset_webhooks.webhooks w
       left join asset_webhooks.payloads p on p.webhook_id = w.webhook_id
       group by w.webhook_id order by w.webhook_id`,
    ),
    pool.query<{ event_id: string; asset_id: number }>(
      `select event_id, asset_id from asset_webhooks.event_outcomes where outcome = 'delivered' order by occurred_at desc limit 1`,
    ),
  ]);
  return {
    captured: counts[0]?.captured ?? 0,
    waiting: counts[0]?.waiting ?? 0,
    rows: rows.map((row) => ({
      webhook: row.webhook,
      delivered: row.delivered,
      pending: row.pending,
      retries: row.retries,
      deadLetters: row.dead,
      eventsDelivered: row.events,
    })),
    lastEventId: last[0]?.event_id ?? null,
    lastAssetId: last[0]?.asset_id ?? null,
  };
}

/** The dashboard as text lines. */
export function renderDashboard(
  snapshot: DashboardSnapshot,
  elapsedSeconds: number,
  databaseUrl: string,
  configPath: string,
  keepsDatabase = false,
): DashboardView {
  const pad = (value: string | number, width: number): string => String(value).padStart(width);
  const status = [
    `asset-webhooks demo — ${elapsedSeconds}s — events captured: ${snapshot.captured} (waiting for the next run: ${snapshot.waiting})`,
    '',
    `${'webhook'.padEnd(10)}${pad('payloads delivered', 20)}${pad('events delivered', 18)}${pad('pending', 9)}${pad('retries', 9)}${pad('dead letters', 14)}`,
    ...snapshot.rows.map(
      (row) =>
        `${row.webhook.padEnd(10)}${pad(row.delivered, 20)}${pad(row.eventsDelivered, 18)}${pad(row.pending, 9)}${pad(row.retries, 9)}${pad(row.deadLetters, 14)}`,
    ),
  ];
  const help = [
    'Try, in another terminal:',
    `  export DATABASE_URL=${databaseUrl}`,
    `  export ASSET_WEBHOOKS_CONFIG=${configPath}`,
    snapshot.lastEventId
      ? `  npx asset-webhooks trace ${snapshot.lastEventId}`
      : '  npx asset-webhooks trace <eventId>',
    '  npx asset-webhooks dead-letters',
    `  npx asset-webhooks explain --webhook shop --asset ${snapshot.lastAssetId ?? 1}`,
    `  psql "$DATABASE_URL" -c 'select * from asset_webhooks.event_outcomes order by occurred_at desc limit 10'`,
    '',
    keepsDatabase
      ? 'Ctrl-C stops the demo; its tables stay in the database.'
      : 'Ctrl-C stops the demo and removes its database.',
  ];
  return { status, help };
}

/** The live view: the figures, and the commands to try (shown once when the output is not a terminal). */
export interface DashboardView {
  readonly status: readonly string[];
  readonly help: readonly string[];
}
