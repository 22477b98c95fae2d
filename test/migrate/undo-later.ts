import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

/**
 * What each migration after 0005 adds, undone: the schema as the migration
 * before it left it. One place for each, so that an upgrade test of an older
 * migration undoes every later one the same way, and a new migration adds its
 * entry here.
 */
const UNDO: ReadonlyArray<readonly [number, string]> = [
  [
    6,
    `alter table asset_webhooks.outbox drop column traceparent;
     alter table asset_webhooks.events drop column traceparent;
     alter table asset_webhooks.coalesce_runs drop column traceparent;`,
  ],
  [7, 'drop table asset_webhooks.webhook_queues;'],
  [
    8,
    `drop table asset_webhooks.replays;
     alter table asset_webhooks.redeliveries drop column replay_id;
     alter type asset_webhooks.payload_transition drop attribute replay_id;`,
  ],
  [
    9,
    `drop view asset_webhooks.attempts;
     alter table asset_webhooks.attempt_log rename to attempts;
     alter index asset_webhooks.attempt_log_pkey rename to attempts_pkey;
     alter table asset_webhooks.attempts add column sent boolean not null default true,
       add constraint attempts_payload_id_fkey foreign key (payload_id)
         references asset_webhooks.payloads (payload_id) on delete cascade;
     drop table asset_webhooks.in_flight;
     drop index asset_webhooks.payloads_queue;
     drop index asset_webhooks.payloads_expiry;
     alter table asset_webhooks.payloads add column dispatched boolean not null default false,
       add column next_attempt_at timestamptz;
     create index payloads_in_flight on asset_webhooks.payloads (webhook_id) where status = 'pending' and dispatched;
     create index payloads_queue on asset_webhooks.payloads (webhook_id, (payload_id + 0))
       where status = 'pending' and not dispatched;
     create index payloads_expiry on asset_webhooks.payloads (series_started_at)
       where status = 'pending' and not dispatched;`,
  ],
  // Data only: the running replays' keys, which a test of an older migration does not hold.
  [10, 'select 1;'],
];

/** Undoes every migration after `id`, newest first, and forgets that they were applied. */
export async function undoMigrationsAfter(pool: pg.Pool, id: number): Promise<void> {
  for (const [later, sql] of [...UNDO].reverse()) if (later > id) await pool.query(sql);
  await pool.query('delete from asset_webhooks.migrations where id > $1', [id]);
}

/**
 * The migrations numbered `id` or later, as `migrate` applies them to a
 * database that lacks them: the files of sql/migrations, in order, named
 * without `.sql`. An upgrade test expects exactly these applied, so a new
 * migration adds no name to the older tests.
 */
export function migrationsFrom(id: number): string[] {
  const folder = fileURLToPath(new URL('../../sql/migrations/', import.meta.url));
  return readdirSync(folder)
    .filter((name) => /^\d{4}_[a-z0-9_]+\.sql$/.test(name) && Number(name.slice(0, 4)) >= id)
    .sort()
    .map((name) => name.slice(0, -'.sql'.length));
}
