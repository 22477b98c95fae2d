import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterEach, expect, it, vi } from 'vitest';
import { redeliver } from '../../src/investigate/dead-letters.js';
import { migrate } from '../../src/migrate/migrate.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase, type TestDatabase } from '../helpers/test-database.js';

// A signed delivery's webhook-id is what receivers deduplicate on. Payload
// ids start again in every database, so the id must also name the
// installation, and it must stay the same for every attempt and redelivery of
// one payload.

const KEY = `whsec_${randomBytes(32).toString('base64')}`;
// Two installations, each migrated on its own (not cloned from one template).
const first = useTestDatabase({ empty: true });
const second = useTestDatabase({ empty: true });

const started: TestService[] = [];
const receivers: TestReceiver[] = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  for (const service of started.splice(0)) await service.stop();
  for (const receiver of receivers.splice(0)) await receiver.close();
});

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  receivers.push(started);
  return started;
}

async function installationId(db: TestDatabase): Promise<string> {
  const { rows } = await db.pool.query<{ installation_id: string }>(
    'select installation_id from asset_webhooks.installation',
  );
  return rows[0]!.installation_id;
}

async function payloadStatus(db: TestDatabase, payloadId: number): Promise<string | undefined> {
  const { rows } = await db.pool.query<{ status: string }>(
    'select status from asset_webhooks.payloads where payload_id = $1',
    [payloadId],
  );
  return rows[0]?.status;
}

it('gives the same payload id of two separately migrated databases different webhook-ids', async () => {
  vi.stubEnv('ASSET_WEBHOOKS_SECRET_SIGNING', KEY);
  const ids: string[] = [];
  for (const db of [first, second]) {
    await migrate(db.pool, { binding: 'reference' });
    const target = await receiver();
    started.push(
      await startTestService(db.url, receiverConfig([{ id: 'crm', url: target.url, signing: { secret: 'signing' } }])),
    );
    await db.pool.query('insert into assets (asset_id) values (1)');
    await target.waitFor(1, 30_000);
    const request = target.requests[0]!;
    expect(new Webhook(KEY).verify(request.body, request.headers as Record<string, string>)).toEqual(
      JSON.parse(request.body),
    );
    const { rows } = await db.pool.query<{ payload_id: number }>('select payload_id from asset_webhooks.payloads');
    expect(rows).toEqual([{ payload_id: 1 }]);
    ids.push(String(request.headers['webhook-id']));
  }
  expect(ids[0]).not.toBe(ids[1]);
  expect(ids).toEqual([`msg_${await installationId(first)}_1`, `msg_${await installationId(second)}_1`]);
  for (const id of ids) expect(id).toMatch(/^msg_[0-9a-f]{16}_1$/);
}, 90_000);

it('keeps one webhook-id for a retry, a redelivery, and a redelivery moved to another webhook', async () => {
  vi.stubEnv('ASSET_WEBHOOKS_SECRET_SIGNING', KEY);
  const crm = await receiver();
  const shop = await receiver();
  // A 503 (retried), then 400 (dead-lettered); the redelivery 400 again; then moved to shop.
  crm.respond = (_request, index) => (index === 0 ? 503 : 400);
  started.push(
    await startTestService(
      first.url,
      receiverConfig(
        [
          { id: 'crm', url: crm.url, signing: { secret: 'signing' } },
          // Receives no event: its resource type is one no asset has.
          { id: 'shop', url: shop.url, signing: { secret: 'signing' }, resourceTypes: ['Nothing'] },
        ],
        { retry: { delaysSeconds: [1, 1] } },
      ),
    ),
  );
  await first.pool.query('insert into assets (asset_id) values (1001)');
  await crm.waitFor(2, 30_000);
  const { rows } = await first.pool.query<{ payload_id: number }>(
    "select payload_id from asset_webhooks.payloads where webhook_id = 'crm' order by payload_id desc limit 1",
  );
  const payloadId = Number(rows[0]!.payload_id);
  const deadLettered = async (): Promise<true | undefined> =>
    (await payloadStatus(first, payloadId)) === 'dead_lettered' ? true : undefined;
  await eventually(deadLettered, { timeoutMs: 20_000, what: 'the payload dead-lettered (400)' });
  await redeliver(first.pool, payloadId, 'test');
  await crm.waitFor(3, 30_000);
  await eventually(deadLettered, { timeoutMs: 20_000, what: 'the redelivery dead-lettered (400)' });
  await redeliver(first.pool, payloadId, 'test', 'shop');
  await shop.waitFor(1, 30_000);

  const expected = `msg_${await installationId(first)}_${payloadId}`;
  expect([...crm.requests, ...shop.requests].map((request) => request.headers['webhook-id'])).toEqual([
    expected,
    expected,
    expected,
    expected,
  ]);
  expect(new Set([...crm.requests, ...shop.requests].map((request) => request.body)).size).toBe(1);
}, 90_000);
