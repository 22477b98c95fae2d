import { rmSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../src/errors.js';
import { migrate } from '../../src/migrate/migrate.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { copySql, editSql } from './sql-copy.js';

// `create or replace` cannot change a function's result type, and a changed
// parameter list makes another function. migrate drops the old one, and what
// depends on it, when the files recreate all of that, and refuses otherwise.

const db = useTestDatabase({ empty: true });
const temp = useTempDirectories();

beforeAll(async () => {
  await migrate(db.pool, { binding: 'reference' });
});

const signatures = async (name: string): Promise<string[]> =>
  (
    await db.pool.query<{ signature: string }>(
      `select p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid) as signature
       from pg_proc p where p.pronamespace = 'asset_webhooks'::regnamespace and p.proname = $1 order by 1`,
      [name],
    )
  ).rows.map((row) => row.signature);

describe('a function whose signature changes between releases', () => {
  it('is dropped and created again with a new result type, and the view that calls it with it', async () => {
    const sql = copySql(temp('aw-migrate-signature-'));
    editSql(
      sql,
      'functions/excluding_check.sql',
      'p_event asset_webhooks.events) returns text',
      'p_event asset_webhooks.events) returns varchar',
    );
    await migrate(db.pool, { sqlDirectory: sql });
    expect(await signatures('excluding_check')).toEqual([
      'asset_webhooks.excluding_check(jsonb,asset_webhooks.events) -> character varying',
    ]);
    const { rows } = await db.pool.query<{ type: string }>(
      `select format_type(a.atttypid, a.atttypmod) as type from pg_attribute a
       where a.attrelid = 'asset_webhooks.event_outcomes'::regclass and a.attname = 'excluded_by'`,
    );
    expect(rows).toEqual([{ type: 'character varying' }]);
  });

  it('is replaced by its new parameter list, with the views, functions and defaults that depend on it, and keeps the eventIds', async () => {
    await db.pool.query('insert into assets (asset_id) values (1)');
    const before = await db.pool.query<{ event_id: string }>(
      'select event_id::text from asset_webhooks.waiting_events',
    );
    const sql = copySql(temp('aw-migrate-signature-'));
    editSql(
      sql,
      'functions/event_id_of.sql',
      'p_occurred_at timestamptz) returns uuid',
      'p_occurred_at timestamptz, p_unused integer default 0) returns uuid',
    );
    editSql(sql, 'functions/process_of_session.sql', '() returns text', '(p_unused integer default 0) returns text');
    await migrate(db.pool, { sqlDirectory: sql });

    expect(await signatures('event_id_of')).toEqual([
      'asset_webhooks.event_id_of(bigint,timestamp with time zone,integer) -> uuid',
    ]);
    // waiting_events called the old event_id_of and find_waiting_event returns its rows: both were recreated.
    const after = await db.pool.query<{ event_id: string }>('select event_id::text from asset_webhooks.waiting_events');
    expect(after.rows).toEqual(before.rows);
    const found = await db.pool.query<{ asset_id: string }>(
      'select asset_id::text from asset_webhooks.find_waiting_event($1)',
      [before.rows[0]!.event_id],
    );
    expect(found.rows).toEqual([{ asset_id: '1' }]);
    // The column default called the old process_of_session: set again on the new one.
    const { rows } = await db.pool.query<{ default: string }>(
      `select pg_get_expr(d.adbin, d.adrelid) as default from pg_attrdef d
       join pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum
       where d.adrelid = 'asset_webhooks.in_flight'::regclass and a.attname = 'process_id'`,
    );
    expect(rows).toEqual([{ default: 'asset_webhooks.process_of_session()' }]);
    expect(await signatures('process_of_session')).toEqual(['asset_webhooks.process_of_session(integer) -> text']);

    // Back to the project's files: the same round trip the other way.
    await migrate(db.pool);
    expect(await signatures('event_id_of')).toEqual([
      'asset_webhooks.event_id_of(bigint,timestamp with time zone) -> uuid',
    ]);
    const again = await db.pool.query<{ event_id: string }>('select event_id::text from asset_webhooks.waiting_events');
    expect(again.rows).toEqual(before.rows);
  });

  it('is refused, with nothing changed, when an object the files do not recreate depends on it', async () => {
    await db.pool.query('create view public.series_report as select asset_webhooks.now() as started');
    const sql = copySql(temp('aw-migrate-signature-'));
    editSql(sql, 'functions/now.sql', 'returns timestamptz', 'returns timestamp');
    editSql(sql, 'functions/payload_state.sql', 'when not p_dispatched', 'when not  p_dispatched');
    const refused = await migrate(db.pool, { sqlDirectory: sql }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(UserError);
    expect((refused as UserError).message).toBe(
      'sql/functions/now.sql: expected to drop function asset_webhooks.now() ' +
        'to create it anew (its signature or columns changed, or its file is gone), got objects that depend on it and that ' +
        'migrate does not recreate: view series_report (drop or change them first; no function was changed)',
    );
    expect(await signatures('now')).toEqual(['asset_webhooks.now() -> timestamp with time zone']);
    const { rows } = await db.pool.query<{ same: boolean }>(
      "select position('not  p_dispatched' in prosrc) = 0 as same from pg_proc where proname = 'payload_state'",
    );
    expect(rows).toEqual([{ same: true }]);
    await db.pool.query('drop view public.series_report');
  });

  it('is dropped when its file is removed', async () => {
    const sql = copySql(temp('aw-migrate-signature-'));
    rmSync(path.join(sql, 'functions/payload_state.sql'));
    await migrate(db.pool, { sqlDirectory: sql });
    expect(await signatures('payload_state')).toEqual([]);
    await migrate(db.pool);
    expect(await signatures('payload_state')).toEqual([
      'asset_webhooks.payload_state(text,boolean,timestamp with time zone) -> text',
    ]);
  });
});
