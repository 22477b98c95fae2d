import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimPayloads } from '../../src/delivery/attempt-store.js';
import { expiredPayloads } from '../../src/delivery/recovery-reads.js';
import { applyTransitions, type AttemptResultTransition } from '../../src/lifecycle/transitions.js';
import { ClockPools } from '../helpers/db-clock.js';
import { insertPayloads } from '../helpers/delivery.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The delivery window of a payload is the database's to apply, by its own
// clock (asset_webhooks.now(), moved here by asset_webhooks.clock):
// transition_payloads turns a retry decided at or past
// series_started_at + window_seconds into `expired`, and keeps every retry
// time within the window.

const db = useTestDatabase();
let clocks: ClockPools;

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     values ('shop', 'http://127.0.0.1/', true, 4)`,
  );
  clocks = new ClockPools(db.url);
});
afterEach(async () => {
  await clocks.close();
});

const WINDOW = 60;

/** A payload of shop whose first attempt is in flight, its series started now. */
async function inFlight(): Promise<number> {
  const [id] = await insertPayloads(db.pool, 'shop', 1);
  const claimed = await claimPayloads(db.pool, {
    now: new Date(),
    max: 1,
    share: 1,
    after: null,
    expireAfterSeconds: WINDOW,
  });
  expect(claimed.map((payload) => payload.payloadId)).toEqual([id]);
  return id!;
}

/** The policy's retry of attempt 1, after `retryInMs`, as the service writes it. */
function retry(
  payloadId: number,
  retryInMs: number,
  options: { kind?: 'attempt_result' | 'interrupted'; holdWebhookForMs?: number } = {},
): AttemptResultTransition {
  return {
    kind: options.kind ?? 'attempt_result',
    payloadId,
    series: 1,
    attemptNo: 1,
    outcome: 'retry',
    at: null,
    retryInMs,
    windowSeconds: WINDOW,
    durationMs: 3,
    statusCode: options.kind === 'interrupted' ? null : 503,
    errorClass: options.kind === 'interrupted' ? 'interrupted' : null,
    errorMessage: null,
    responseExcerpt: null,
    sentAt: null,
    receiverFailed: options.kind === 'interrupted' ? null : true,
    holdWebhookForMs: options.holdWebhookForMs ?? null,
  };
}

async function stateOf(
  client: pg.Pool,
  payloadId: number,
): Promise<{
  status: string;
  dead_letter_reason: string | null;
  retry_at_end: boolean | null;
  attempt_outcome: string;
}> {
  const { rows } = await client.query(
    `select p.status, p.dead_letter_reason, f.next_attempt_at = p.series_started_at + make_interval(secs => $2) as retry_at_end,
            a.outcome as attempt_outcome
     from asset_webhooks.payloads p join asset_webhooks.attempts a using (payload_id)
     left join asset_webhooks.in_flight f using (payload_id)
     where p.payload_id = $1`,
    [payloadId, WINDOW],
  );
  return rows[0];
}

describe("the delivery window, by the database's clock", () => {
  it("turns a retry decided at the window's end into expired, the attempt's outcome and the answer too", async () => {
    const id = await inFlight();
    const answers = await applyTransitions(clocks.ahead(WINDOW * 1000), [retry(id, 1000)]);
    expect(answers).toEqual([{ applied: true, reason: null, outcome: 'expired' }]);
    expect(await stateOf(db.pool, id)).toEqual({
      status: 'dead_lettered',
      dead_letter_reason: 'expired',
      retry_at_end: null,
      attempt_outcome: 'expired',
    });
  });

  it("keeps a retry decided before the window's end, at the end at the latest; the sweep ends it there", async () => {
    const id = await inFlight();
    // One second before the end, a retry in two seconds comes at the end.
    const answers = await applyTransitions(clocks.ahead((WINDOW - 1) * 1000), [
      retry(id, 2000, { holdWebhookForMs: 2000 }),
    ]);
    expect(answers).toEqual([{ applied: true, reason: null, outcome: 'retry' }]);
    expect(await stateOf(db.pool, id)).toEqual({
      status: 'pending',
      dead_letter_reason: null,
      retry_at_end: true,
      attempt_outcome: 'retry',
    });
    const { rows } = await db.pool.query<{ held_to_end: boolean }>(
      `select w.hold_until = p.series_started_at + make_interval(secs => $2) as held_to_end
       from asset_webhooks.webhooks w join asset_webhooks.payloads p using (webhook_id) where p.payload_id = $1`,
      [id, WINDOW],
    );
    expect(rows).toEqual([{ held_to_end: true }]);
    // Not expired before the end by the database's clock, expired once it has passed.
    expect(await expiredPayloads(clocks.ahead((WINDOW - 1) * 1000), WINDOW, 10)).toEqual([]);
    expect(await expiredPayloads(clocks.ahead(WINDOW * 1000), WINDOW, 10)).toEqual([{ payloadId: id, series: 1 }]);
  });

  it('expires an interrupted attempt found at the end, and retries one found before it at once', async () => {
    const late = await inFlight();
    expect(await applyTransitions(clocks.ahead(WINDOW * 1000 + 1), [retry(late, 0, { kind: 'interrupted' })])).toEqual([
      { applied: true, reason: null, outcome: 'expired' },
    ]);
    const early = await inFlight();
    expect(await applyTransitions(db.pool, [retry(early, 0, { kind: 'interrupted' })])).toEqual([
      { applied: true, reason: null, outcome: 'retry' },
    ]);
    const { rows } = await db.pool.query<{ due: boolean }>(
      'select next_attempt_at <= asset_webhooks.now() as due from asset_webhooks.in_flight where payload_id = $1',
      [early],
    );
    expect(rows).toEqual([{ due: true }]);
  });
});
