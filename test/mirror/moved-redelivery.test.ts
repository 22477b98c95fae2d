import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

const redeliver = (...args: string[]) => runCli(['dead-letters', 'redeliver', ...args, '--database-url', db.url]);

async function placeOf(payloadId: number): Promise<{ webhook_id: string; status: string }> {
  const { rows } = await db.pool.query<{ webhook_id: string; status: string }>(
    'select webhook_id, status from asset_webhooks.payloads where payload_id = $1',
    [payloadId],
  );
  return rows[0]!;
}

it(
  'a dead letter carrying UNMATCHED moves only to a mirror webhook; one without moves anywhere',
  { timeout: 60_000 },
  async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
    const filters = [{ filterKind: 'keywords' as const, condition: 'ANY' as const, value: ['shop'] }];
    // Two mirror webhooks with the same checks, and a plain one.
    const copy = openWebhook('copy', { mirror: true, filters });
    const spare = openWebhook('spare', { mirror: true, filters });
    const plain = openWebhook('plain', { filters });
    await registerWebhooks(db.pool, [copy, spare, plain]);
    await db.pool.query('insert into assets (asset_id) values (7)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (7, 'shop')");
    await runCoalesce(db.pool, [copy, spare, plain]);
    await db.pool.query('delete from asset_keywords where asset_id = 7');
    await runCoalesce(db.pool, [copy, spare, plain]);

    const [copyFirst, copyUnmatched] = await payloads(db.pool, 'copy');
    const [spareFirst, spareUnmatched] = await payloads(db.pool, 'spare');
    expect(bodyEvents(copyFirst!).map((event) => event.eventType)).not.toContain('UNMATCHED');
    expect(bodyEvents(copyUnmatched!).map((event) => event.eventType)).toEqual(['UNMATCHED']);
    expect((await payloads(db.pool, 'plain')).length).toBe(1);
    await db.pool.query(
      `update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected',
              dead_lettered_at = now(), last_status_code = 400
       where webhook_id in ('copy', 'spare')`,
    );

    // To the plain webhook: refused, for either mirror webhook's UNMATCHED.
    for (const payload of [copyUnmatched!, spareUnmatched!]) {
      const refused = await redeliver(String(payload.payload_id), '--to', 'plain');
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain(
        `--to: expected a mirror webhook, got "plain", which is not one: payload ${payload.payload_id} carries UNMATCHED events`,
      );
      expect(await placeOf(payload.payload_id)).toEqual({ webhook_id: payload.webhook_id, status: 'dead_lettered' });
    }
    // A bulk move of copy's dead letters: refused whole, in a dry run too.
    for (const dry of [['--dry-run'], []]) {
      const bulk = await redeliver('--webhook', 'copy', '--to-webhook', 'plain', ...dry);
      expect(bulk.code).not.toBe(0);
      expect(bulk.stderr).toContain(
        `--to-webhook: expected a mirror webhook, got "plain", which is not one: payload ${copyUnmatched!.payload_id} carries UNMATCHED events`,
      );
    }
    expect(await placeOf(copyFirst!.payload_id)).toEqual({ webhook_id: 'copy', status: 'dead_lettered' });

    // Without UNMATCHED, to the plain webhook; with it, to the other mirror webhook.
    expect(await redeliver(String(copyFirst!.payload_id), '--to', 'plain')).toMatchObject({ code: 0 });
    expect(await placeOf(copyFirst!.payload_id)).toEqual({ webhook_id: 'plain', status: 'pending' });
    expect(await redeliver(String(spareFirst!.payload_id), '--to', 'plain')).toMatchObject({ code: 0 });
    expect(await placeOf(spareFirst!.payload_id)).toEqual({ webhook_id: 'plain', status: 'pending' });
    expect(await redeliver(String(copyUnmatched!.payload_id), '--to', 'spare')).toMatchObject({ code: 0 });
    expect(await placeOf(copyUnmatched!.payload_id)).toEqual({ webhook_id: 'spare', status: 'pending' });
  },
);

const runbook = fileURLToPath(new URL('../../sql/runbooks/redeliver-dead-letter.sql', import.meta.url));

it(
  'a dead letter carrying UNMATCHED is refused its own webhook once that is set back to plain: single, bulk and runbook',
  { timeout: 60_000 },
  async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
    const filters = [{ filterKind: 'keywords' as const, condition: 'ANY' as const, value: ['shop'] }];
    const mirror = openWebhook('copy', { mirror: true, filters });
    await registerWebhooks(db.pool, [mirror]);
    await db.pool.query('insert into assets (asset_id) values (7), (8)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (7, 'shop'), (8, 'shop')");
    await runCoalesce(db.pool, [mirror]);
    await db.pool.query('delete from asset_keywords where asset_id = 7');
    await runCoalesce(db.pool, [mirror]);
    const [first, unmatched] = await payloads(db.pool, 'copy');
    expect(bodyEvents(unmatched!).map((event) => event.eventType)).toEqual(['UNMATCHED']);
    await db.pool.query(
      `update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected',
              dead_lettered_at = now(), last_status_code = 400
       where webhook_id = 'copy'`,
    );
    // While copy is a mirror webhook, its UNMATCHED goes back to it: a dry run of its dead letters passes.
    expect(await redeliver('--webhook', 'copy', '--dry-run')).toMatchObject({ code: 0 });

    // copy set back to plain (mirror: false), and a coalescing run routes by that document.
    const plain = openWebhook('copy', { filters });
    await db.pool.query("update assets set title = 'routed as plain' where asset_id = 8");
    await runCoalesce(db.pool, [plain]);
    await db.pool.query(
      `update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected',
              dead_lettered_at = now(), last_status_code = 400
       where webhook_id = 'copy' and status <> 'dead_lettered'`,
    );

    const single = await redeliver(String(unmatched!.payload_id));
    expect(single.code).toBe(1);
    expect(single.stderr.trim()).toBe(
      `PAYLOAD_ID: expected a dead letter of a mirror webhook, got payload ${unmatched!.payload_id} of "copy", which is not one any more (mirror: false): it carries UNMATCHED events, which only a mirror webhook receives; move it to a mirror webhook (dead-letters redeliver ${unmatched!.payload_id} --to WEBHOOK_ID)`,
    );
    expect(await placeOf(unmatched!.payload_id)).toEqual({ webhook_id: 'copy', status: 'dead_lettered' });
    // A bulk redelivery of copy's dead letters: refused whole, in a dry run too.
    for (const dry of [['--dry-run'], []]) {
      const bulk = await redeliver('--webhook', 'copy', ...dry);
      expect(bulk.code).toBe(1);
      expect(bulk.stderr).toContain(
        `--webhook: expected a dead letter of a mirror webhook, got payload ${unmatched!.payload_id} of "copy", which is not one any more (mirror: false)`,
      );
    }
    expect(await placeOf(first!.payload_id)).toEqual({ webhook_id: 'copy', status: 'dead_lettered' });
    // The runbook calls the lifecycle's redelivery, which refuses it too, and says why.
    const { stdout } = await promisify(execFile)('psql', [
      db.url,
      '-X',
      '-v',
      `payload_id=${unmatched!.payload_id}`,
      '-f',
      runbook,
    ]);
    expect(stdout).toContain('Nothing was redelivered: the payload carries UNMATCHED events');
    expect(await placeOf(unmatched!.payload_id)).toEqual({ webhook_id: 'copy', status: 'dead_lettered' });
    const { rows } = await db.pool.query<{ n: number }>(
      'select count(*)::int as n from asset_webhooks.redeliveries where payload_id = $1',
      [unmatched!.payload_id],
    );
    expect(rows[0]!.n).toBe(0);

    // The lifecycle's redelivery of both at once answers each in its place: the one with UNMATCHED refused, the other applied.
    const client = await db.pool.connect();
    try {
      await client.query('begin');
      const { rows: answers } = await client.query(
        "select payload_id::int, applied, reason, series from asset_webhooks.redeliver_payloads($1::bigint[], 'test', null)",
        [[unmatched!.payload_id, first!.payload_id]],
      );
      expect(answers).toEqual([
        { payload_id: unmatched!.payload_id, applied: false, reason: 'unmatched_to_plain_webhook', series: 1 },
        { payload_id: first!.payload_id, applied: true, reason: null, series: 2 },
      ]);
    } finally {
      await client.query('rollback');
      client.release();
    }

    // Its dead letters without UNMATCHED still go back to it.
    expect(await redeliver(String(first!.payload_id))).toMatchObject({ code: 0 });
    expect(await placeOf(first!.payload_id)).toEqual({ webhook_id: 'copy', status: 'pending' });
  },
);
