import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { redeliver } from '../../src/investigate/dead-letters.js';
import { receiverConfig, type TestWebhook } from '../helpers/config.js';
import { eventually, startTestReceiver, type ReceivedRequest, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();

/** Two keys of a rotation, as a secret manager would hold them: old, then new. */
const OLD_KEY = `whsec_${randomBytes(32).toString('base64')}`;
const NEW_KEY = `whsec_${randomBytes(24).toString('base64')}`;
/** Distinctive pieces of the keys that no log line or record may contain. */
const KEY_FRAGMENTS = [OLD_KEY, NEW_KEY, OLD_KEY.slice(6, 26), NEW_KEY.slice(6, 26)];

let receiver: TestReceiver;
let running: TestService | undefined;
let logged = '';

beforeEach(async () => {
  await resetData(db.pool);
  receiver = await startTestReceiver();
  logged = '';
});
afterEach(async () => {
  vi.unstubAllEnvs();
  vi.useRealTimers();
  await running?.stop();
  running = undefined;
  await receiver.close();
});

async function start(webhook: Partial<TestWebhook>): Promise<void> {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString('utf8');
      done();
    },
  });
  const yaml = receiverConfig([{ id: 'crm', url: receiver.url, ...webhook }], {
    retry: { delaysSeconds: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1] },
  });
  running = await startTestService(db.url, yaml, { logger: pino({ level: 'debug' }, sink) });
}

/** Verifies with the receiver-side library, as an integrator would; throws WebhookVerificationError. */
function verify(key: string, request: Pick<ReceivedRequest, 'headers' | 'body'>): unknown {
  return new Webhook(key).verify(request.body, request.headers as Record<string, string>);
}

async function storedBody(payloadId: number): Promise<string> {
  const { rows } = await db.pool.query<{ body: string }>(
    'select body from asset_webhooks.payloads where payload_id = $1',
    [payloadId],
  );
  return rows[0]!.body;
}

function expectNoKeyIn(text: string, where: string): void {
  for (const fragment of KEY_FRAGMENTS)
    expect(text, `${where} contains a part of a signing key`).not.toContain(fragment);
}

describe('signed deliveries (signing.secret)', () => {
  it('every attempt and a redelivery verify with each key of a rotation, under one webhook-id, over the stored body', async () => {
    vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', `${OLD_KEY} ${NEW_KEY}`);
    // First a 503 (retried), then 200; later, after the dead letter, the redelivery.
    receiver.respond = (_request, index) => (index === 0 ? 503 : index === 1 ? 200 : index === 2 ? 400 : 200);
    await start({ signing: { secret: 'crm-signing' } });

    const startedAt = Date.now();
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(2);
    await db.pool.query('insert into assets (asset_id) values (2)');
    await receiver.waitFor(3);
    const { rows: payloads } = await db.pool.query<{ payload_id: number; status: string }>(
      'select payload_id, status from asset_webhooks.payloads order by payload_id',
    );
    const [first, second] = payloads.map((row) => Number(row.payload_id));
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ status: string }>(
          'select status from asset_webhooks.payloads where payload_id = $1',
          [second],
        );
        return rows[0]?.status === 'dead_lettered' ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the second payload dead-lettered (400)' },
    );
    await redeliver(db.pool, second!, 'test');
    await receiver.waitFor(4);

    const requests = receiver.requests;
    const {
      rows: [installation],
    } = await db.pool.query<{ id: string }>('select installation_id as id from asset_webhooks.installation');
    expect(requests.map((request) => request.headers['webhook-id'])).toEqual([
      `msg_${installation!.id}_${first}`,
      `msg_${installation!.id}_${first}`,
      `msg_${installation!.id}_${second}`,
      `msg_${installation!.id}_${second}`,
    ]);
    expect(requests[0]!.body).toBe(await storedBody(first!));
    expect(requests[1]!.body).toBe(await storedBody(first!));
    expect(requests[3]!.body).toBe(await storedBody(second!));
    for (const request of requests) {
      const signatures = String(request.headers['webhook-signature']).split(' ');
      expect(signatures).toHaveLength(2);
      for (const signature of signatures) expect(signature).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
      // Each key on its own: a receiver that holds only the old, or only the new key, accepts.
      expect(verify(OLD_KEY, request)).toEqual(JSON.parse(request.body));
      expect(verify(NEW_KEY, request)).toEqual(JSON.parse(request.body));
      // A key the service never had is refused (the check can fail).
      expect(() => verify(`whsec_${randomBytes(32).toString('base64')}`, request)).toThrow(WebhookVerificationError);
      expect(request.headers['x-api-key']).toBeUndefined();
    }
    // Each attempt is signed when it is sent: after the change it carries, before
    // the receiver has it, and the retry (a second or more later) anew.
    const timestamps = requests.map((request) => Number(request.headers['webhook-timestamp']));
    for (const [index, request] of requests.entries()) {
      expect(String(request.headers['webhook-timestamp'])).toMatch(/^[0-9]+$/);
      expect(timestamps[index]).toBeGreaterThanOrEqual(Math.floor(startedAt / 1000));
      expect(timestamps[index]).toBeLessThanOrEqual(Math.floor(request.at / 1000));
    }
    expect(timestamps[1]).toBeGreaterThan(timestamps[0]!);

    const { rows: attempts } = await db.pool.query<{ text: string }>(
      'select row_to_json(a)::text as text from asset_webhooks.attempts a',
    );
    expectNoKeyIn(attempts.map((row) => row.text).join('\n'), 'asset_webhooks.attempts');
    expectNoKeyIn(logged, 'the service log');
  });

  it('refuses a changed body and a request whose timestamp has become old', async () => {
    vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', NEW_KEY);
    await start({ signing: { secret: 'crm-signing' } });
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    const request = receiver.requests[0]!;
    expect(verify(NEW_KEY, request)).toEqual(JSON.parse(request.body));

    const changed = request.body.replace('"assetId":1', '"assetId":2');
    expect(changed).not.toBe(request.body);
    expect(() => verify(NEW_KEY, { ...request, body: changed })).toThrow(/No matching signature found/);
    expect(() => verify(NEW_KEY, { ...request, body: `${request.body} ` })).toThrow(WebhookVerificationError);

    // The same request replayed ten minutes later: the library's five-minute tolerance refuses it.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(request.at + 10 * 60_000);
    expect(() => verify(NEW_KEY, request)).toThrow(/Message timestamp too old/);
  });

  it('fails attempts as secret_unavailable, and retries, while the signing secret is missing or malformed, then signs', async () => {
    const malformed = `whsec_${randomBytes(32).toString('base64')} sk_live_${KEY_FRAGMENTS[2]}`;
    vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', malformed);
    await start({ signing: { secret: 'crm-signing' } });
    await db.pool.query('insert into assets (asset_id) values (1)');

    const failed = await eventually(
      async () => {
        const { rows } = await db.pool.query<{ error_class: string; error_message: string; outcome: string }>(
          'select error_class, error_message, outcome from asset_webhooks.attempts order by attempt_no',
        );
        return rows.length >= 2 ? rows : undefined;
      },
      { timeoutMs: 20_000, what: 'two failed attempts' },
    );
    expect(failed[0]).toEqual({
      error_class: 'secret_unavailable',
      error_message: 'signing secret "crm-signing": expected key 2 of 2 to start with whsec_',
      outcome: 'retry',
    });
    expect(receiver.requests).toHaveLength(0);

    vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', undefined);
    const unset = await eventually(
      async () => {
        const { rows } = await db.pool.query<{ error_message: string }>(
          "select error_message from asset_webhooks.attempts where error_message like '%environment variable%' limit 1",
        );
        return rows[0];
      },
      { timeoutMs: 20_000, what: 'an attempt without the variable' },
    );
    expect(unset.error_message).toMatch(/ASSET_WEBHOOKS_SECRET_CRM_SIGNING/);

    vi.stubEnv('ASSET_WEBHOOKS_SECRET_CRM_SIGNING', OLD_KEY);
    await receiver.waitFor(1);
    expect(verify(OLD_KEY, receiver.requests[0]!)).toEqual(JSON.parse(receiver.requests[0]!.body));
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
        return rows.length === 1 && rows[0]!.status === 'delivered' ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the payload delivered' },
    );

    const { rows: attempts } = await db.pool.query<{ text: string }>(
      'select row_to_json(a)::text as text from asset_webhooks.attempts a',
    );
    expectNoKeyIn(attempts.map((row) => row.text).join('\n'), 'asset_webhooks.attempts');
    expectNoKeyIn(logged, 'the service log');
    expect(logged).toContain('secret_unavailable');
  });

  it('sends no webhook-* headers for a webhook without signing', async () => {
    await start({});
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    const names = Object.keys(receiver.requests[0]!.headers);
    expect(names.filter((name) => name.startsWith('webhook-'))).toEqual([]);
  });
});
