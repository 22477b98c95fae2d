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
        `--to-webhook: expected a mirror webhook, got "plain", which is not one: payload ${copyUnmatched!.payload_id} (and perhaps others of those selected) carries UNMATCHED events`,
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
