import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const FROM = '2026-11-20T00:00:00.000Z';
const TO = '2026-11-21T00:00:00.000Z';

const replay = (...args: string[]) => runCli(['replay', '--from', FROM, '--to', TO, ...args, '--database-url', db.url]);

beforeAll(async () => {
  await resetData(db.pool);
  // As the service records them: one sending, one paused by its document, one disabled.
  await db.pool
    .query(`insert into asset_webhooks.webhooks (webhook_id, url, enabled, paused_since, config_paused) values
    ('crm', 'http://127.0.0.1/crm', true, null, false),
    ('held', 'http://127.0.0.1/held', true, now(), true),
    ('off', 'http://127.0.0.1/off', false, null, false)`);
  await db.pool.query(
    `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids, created_at,
                                          series_started_at, delivered_at)
     select w, 'delivered', '{"count":0,"events":[],"webhookTimestamp":"2026-11-20T01:00:00.000Z"}', 66, 0, '{}',
            $1::timestamptz + interval '1 hour', now(), now()
     from unnest(array['crm', 'held', 'off']) w`,
    [FROM],
  );
});

describe('replay to a webhook that is not sending', () => {
  it('to a paused webhook: the payloads wait with its others, and the command says so', async () => {
    const result = await replay('--webhook', 'held');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^replay \d+ of webhook held: 1 payload \(0 events\) queued again \(done up to payload \d+\); webhook held is paused: they wait, without expiring, until paused is false again \(then SIGHUP\)\n$/,
    );
  });

  it('of a disabled webhook, or moved to one, is refused before anything changes (exit 1)', async () => {
    const own = await replay('--webhook', 'off');
    expect(own.code).toBe(1);
    expect(own.stderr).toBe(
      '--webhook: expected an enabled webhook of the running service (crm, held), got "off" (disabled)\n',
    );
    const moved = await replay('--webhook', 'crm', '--to-webhook', 'off');
    expect(moved.code).toBe(1);
    expect(moved.stderr).toBe(
      '--to-webhook: expected an enabled webhook of the running service (crm, held), got "off" (disabled)\n',
    );
    const { rows } = await db.pool.query<{ webhook_id: string; status: string }>(
      "select webhook_id, status from asset_webhooks.payloads where webhook_id in ('crm', 'off') order by webhook_id",
    );
    expect(rows).toEqual([
      { webhook_id: 'crm', status: 'delivered' },
      { webhook_id: 'off', status: 'delivered' },
    ]);
  });
});
