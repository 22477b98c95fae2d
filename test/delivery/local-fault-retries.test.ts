import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  claimPayloads,
  completeAttempts,
  type AttemptResult,
  type SettleRequest,
} from '../../src/delivery/attempt-store.js';
import { Completer } from '../../src/delivery/completer.js';
import { settleAttempt } from '../../src/delivery/deliver.js';
import type { Classification } from '../../src/delivery/policy/classify.js';
import { LOCAL_FAULT_RETRY_SECONDS } from '../../src/delivery/policy/next-state.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads, testDelivery, type TestDelivery } from '../helpers/delivery.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Attempts that failed for want of the process's own file descriptors or
// memory do not count against retry.delaysSeconds, with the real database
// counting them (asset_webhooks.attempts) and its clock moved by the test.

const db = useTestDatabase();
let delivery: TestDelivery | undefined;

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  await delivery?.close();
  delivery = undefined;
});

const failed: Record<'local_fault' | 'retryable', Omit<AttemptResult, 'outcome'>> = {
  local_fault: {
    durationMs: 1,
    statusCode: null,
    errorClass: 'local_fault',
    errorMessage: 'connect EMFILE 127.0.0.1:9',
    responseExcerpt: null,
  },
  retryable: { durationMs: 1, statusCode: 503, errorClass: null, errorMessage: null, responseExcerpt: null },
};

describe('local faults and the retry schedule', () => {
  it('three local faults, then a 503: the one retry of delaysSeconds [60] is still there; a second 503 uses it up', async () => {
    delivery = await testDelivery(
      db.pool,
      receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }], { retry: { delaysSeconds: [60] } }),
    );
    const [id] = await insertPayloads(db.pool, 'crm', 1);
    const outcomes: Array<{ outcome: string; retryInSeconds: number | null }> = [];
    const steps: Array<'local_fault' | 'retryable'> = [
      'local_fault',
      'local_fault',
      'local_fault',
      'retryable',
      'retryable',
    ];
    // One session, its database clock moved to each retry's time (asset_webhooks.clock).
    const session = await db.pool.connect();
    const context = {
      ...delivery.context,
      completer: new Completer(session),
    };
    try {
      for (const step of steps) {
        const [claimed] = await claimPayloads(session, {
          now: new Date(),
          max: 1,
          share: 1,
          after: null,
          expireAfterSeconds: 86_400,
        });
        expect(claimed).toBeDefined();
        const { result } = await settleAttempt(context, claimed!, failed[step], step as Classification);
        const { rows } = await session.query<{ in_s: number | null }>(
          'select round(extract(epoch from next_attempt_at - asset_webhooks.now()))::int as in_s from asset_webhooks.in_flight where payload_id = $1',
          [id],
        );
        outcomes.push({ outcome: result.outcome, retryInSeconds: rows[0]?.in_s ?? null });
        await session.query(
          `select set_config('asset_webhooks.clock', (f.next_attempt_at - clock_timestamp())::text, false)
           from asset_webhooks.in_flight f where f.payload_id = $1 and f.next_attempt_at is not null`,
          [id],
        );
      }
    } finally {
      await session.query("select set_config('asset_webhooks.clock', '', false)");
      session.release();
    }
    expect(outcomes).toEqual([
      { outcome: 'retry', retryInSeconds: LOCAL_FAULT_RETRY_SECONDS },
      { outcome: 'retry', retryInSeconds: LOCAL_FAULT_RETRY_SECONDS },
      { outcome: 'retry', retryInSeconds: LOCAL_FAULT_RETRY_SECONDS },
      { outcome: 'retry', retryInSeconds: 60 },
      { outcome: 'retries_exhausted', retryInSeconds: null },
    ]);
    // Each attempt is recorded with its class.
    const { rows } = await db.pool.query<{ error_class: string | null }>(
      'select error_class from asset_webhooks.attempts order by attempt_no',
    );
    expect(rows.map((row) => row.error_class)).toEqual(['local_fault', 'local_fault', 'local_fault', null, null]);
  });
});
