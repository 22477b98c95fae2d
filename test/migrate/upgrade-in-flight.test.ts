import { expect, it } from 'vitest';
import { claimPayloads } from '../../src/delivery/attempt-store.js';
import { applyTransitions } from '../../src/lifecycle/transitions.js';
import { migrate } from '../../src/migrate/migrate.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { migrationsFrom, undoMigrationsAfter } from './undo-later.js';

const db = useTestDatabase();

const GONE = '00000000-0000-4000-8000-00000000dead';

it('0009 upgrades a live installation: each payload keeps its state, its attempts and its process, and goes on from there', async () => {
  await resetData(db.pool);
  await undoMigrationsAfter(db.pool, 8);
  await db.pool.query(`insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
    values ('shop', 'http://127.0.0.1:9/', true, 4)`);
  // The installation as migration 0008 left it, one payload in each state, as
  // that release's functions wrote them (attempts counted at the claim).
  const payload = async (columns: string): Promise<number> => {
    const { rows } = await db.pool.query<{ payload_id: number }>(
      `insert into asset_webhooks.payloads (webhook_id, status, dispatched, attempts, next_attempt_at, last_attempt_at,
         delivered_at, dead_letter_reason, dead_lettered_at, body, byte_size, event_count, event_ids, series_started_at)
       values ('shop', ${columns}, '{}', 2, 0, '{}', now() - interval '10 minutes') returning payload_id`,
    );
    return rows[0]!.payload_id;
  };
  const waiting = await payload(`'pending', false, 0, null, null, null, null, null`);
  const inFlight = await payload(`'pending', true, 2, null, now() - interval '1 minute', null, null, null`);
  const held = await payload(
    `'pending', true, 1, now() + interval '1 hour', now() - interval '2 minutes', null, null, null`,
  );
  const standby = await payload(`'pending', true, 1, null, now() - interval '1 minute', null, null, null`);
  const delivered = await payload(`'delivered', false, 1, null, now() - interval '5 minutes', now(), null, null`);
  const removed = await payload(
    `'dead_lettered', false, 1, null, now() - interval '3 minutes', null, 'webhook_removed', now()`,
  );
  await db.pool.query(
    `insert into asset_webhooks.attempts (payload_id, series, attempt_no, started_at, status_code, outcome, process_id, sent)
     values ($1, 1, 1, now() - interval '3 minutes', 503, 'retry', null, true),
            ($1, 1, 2, now() - interval '1 minute', null, null, $5, true),
            ($2, 1, 1, now() - interval '2 minutes', 503, 'retry', null, true),
            ($3, 1, 1, now() - interval '1 minute', null, null, $5, false),
            ($4, 1, 1, now() - interval '5 minutes', 200, 'delivered', null, true),
            ($6, 1, 1, now() - interval '3 minutes', null, null, $5, true)`,
    [inFlight, held, standby, delivered, GONE, removed],
  );

  const result = await migrate(db.pool);
  expect(result.applied).toEqual(migrationsFrom(9));

  // Each payload's slot, from its open attempt or its retry time.
  const { rows: slots } = await db.pool.query(
    `select payload_id, attempt_no, process_id, sent, next_attempt_at is not null as held
     from asset_webhooks.in_flight order by payload_id`,
  );
  expect(slots).toEqual([
    { payload_id: inFlight, attempt_no: 2, process_id: GONE, sent: true, held: false },
    { payload_id: held, attempt_no: 1, process_id: null, sent: true, held: true },
    { payload_id: standby, attempt_no: 1, process_id: GONE, sent: false, held: false },
  ]);
  // attempts counts those with a result; every attempt is still there, in the log or in flight.
  const { rows: payloads } = await db.pool.query(
    'select payload_id, status, attempts from asset_webhooks.payloads order by payload_id',
  );
  expect(payloads).toEqual([
    { payload_id: waiting, status: 'pending', attempts: 0 },
    { payload_id: inFlight, status: 'pending', attempts: 1 },
    { payload_id: held, status: 'pending', attempts: 1 },
    { payload_id: standby, status: 'pending', attempts: 0 },
    { payload_id: delivered, status: 'delivered', attempts: 1 },
    { payload_id: removed, status: 'dead_lettered', attempts: 1 },
  ]);
  const { rows: attempts } = await db.pool.query(
    'select payload_id, attempt_no, outcome, sent from asset_webhooks.attempts order by payload_id, attempt_no',
  );
  expect(attempts).toEqual([
    { payload_id: inFlight, attempt_no: 1, outcome: 'retry', sent: true },
    { payload_id: inFlight, attempt_no: 2, outcome: null, sent: true },
    { payload_id: held, attempt_no: 1, outcome: 'retry', sent: true },
    { payload_id: standby, attempt_no: 1, outcome: null, sent: false },
    { payload_id: delivered, attempt_no: 1, outcome: 'delivered', sent: true },
    { payload_id: removed, attempt_no: 1, outcome: null, sent: true },
  ]);

  // And on from there: the attempt in flight gets its result, the open one of the removed webhook's
  // payload is closed by its late result, the standby is given back, and the claim takes the waiting payloads.
  const result200 = {
    kind: 'attempt_result' as const,
    series: 1,
    outcome: 'delivered' as const,
    at: null,
    retryInMs: null,
    windowSeconds: 86_400,
    durationMs: 5,
    statusCode: 200,
    errorClass: null,
    errorMessage: null,
    responseExcerpt: null,
    sentAt: null,
    receiverFailed: false,
    holdWebhookForMs: null,
  };
  expect(
    await applyTransitions(db.pool, [
      { ...result200, payloadId: inFlight, attemptNo: 2 },
      { ...result200, payloadId: removed, attemptNo: 1 },
      { kind: 'given_back', payloadId: standby, series: 1, attemptNo: 1 },
    ]),
  ).toEqual([
    { applied: true, reason: null, outcome: 'delivered' },
    { applied: false, reason: 'not_in_flight', outcome: null },
    { applied: true, reason: null, outcome: null },
  ]);
  const claimed = await claimPayloads(db.pool, {
    now: new Date(),
    max: 10,
    share: 10,
    after: null,
    expireAfterSeconds: 86_400,
  });
  expect(claimed.map((p) => [p.payloadId, p.attemptNo])).toEqual([
    [waiting, 1],
    [standby, 1],
  ]);
  const { rows: after } = await db.pool.query(
    `select payload_id, outcome from asset_webhooks.attempts where payload_id = any($1::bigint[]) and attempt_no = $2
     order by payload_id`,
    [[inFlight, removed], 2],
  );
  expect(after).toEqual([{ payload_id: inFlight, outcome: 'delivered' }]);
  const { rows: closed } = await db.pool.query(
    'select outcome, status_code from asset_webhooks.attempts where payload_id = $1',
    [removed],
  );
  expect(closed).toEqual([{ outcome: 'retry', status_code: 200 }]);
});
