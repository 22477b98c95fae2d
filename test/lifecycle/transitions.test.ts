import { beforeEach, describe, expect, it } from 'vitest';
import { applyTransitions, redeliverPayloads } from '../../src/lifecycle/transitions.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// Every (state, transition) pair of a payload, through the one function that
// changes payload states (asset_webhooks.transition_payloads,
// sql/migrations/0001_baseline.sql): the state it leads to, or its refusal.
// All pairs go in one batch, so a refused row is also shown not to fail the
// others.

const db = useTestDatabase();

const STATES = ['open', 'waiting', 'retry_held', 'in_flight', 'delivered', 'dead_lettered'] as const;
type State = (typeof STATES)[number];

const KINDS = [
  'attempt_result',
  'interrupted',
  'expiry',
  'webhook_removed',
  'redelivery',
  'replay',
  'given_back',
  'pause_shift',
] as const;
type Kind = (typeof KINDS)[number];

/** What each pair leads to: the payload's state after it, or `refused: reason` (the state stays). */
const TABLE: Record<Kind, Record<State, State | `refused: ${string}`>> = {
  attempt_result: {
    open: 'refused: not_in_flight',
    waiting: 'refused: not_in_flight',
    retry_held: 'refused: not_in_flight',
    in_flight: 'delivered',
    delivered: 'refused: not_in_flight',
    dead_lettered: 'refused: not_in_flight',
  },
  interrupted: {
    open: 'refused: not_in_flight',
    waiting: 'refused: not_in_flight',
    retry_held: 'refused: not_in_flight',
    in_flight: 'retry_held',
    delivered: 'refused: not_in_flight',
    dead_lettered: 'refused: not_in_flight',
  },
  expiry: {
    open: 'refused: not_pending',
    waiting: 'dead_lettered',
    retry_held: 'dead_lettered',
    in_flight: 'refused: in_flight',
    delivered: 'refused: not_pending',
    dead_lettered: 'refused: not_pending',
  },
  webhook_removed: {
    open: 'refused: still_open',
    waiting: 'dead_lettered',
    retry_held: 'dead_lettered',
    in_flight: 'dead_lettered',
    delivered: 'refused: not_pending',
    dead_lettered: 'refused: not_pending',
  },
  redelivery: {
    open: 'refused: not_dead_lettered',
    waiting: 'refused: not_dead_lettered',
    retry_held: 'refused: not_dead_lettered',
    in_flight: 'refused: not_dead_lettered',
    delivered: 'refused: not_dead_lettered',
    dead_lettered: 'waiting',
  },
  replay: {
    open: 'refused: not_delivered',
    waiting: 'refused: not_delivered',
    retry_held: 'refused: not_delivered',
    in_flight: 'refused: not_delivered',
    delivered: 'waiting',
    dead_lettered: 'refused: not_delivered',
  },
  given_back: {
    open: 'refused: not_in_flight',
    waiting: 'refused: not_in_flight',
    retry_held: 'refused: not_in_flight',
    in_flight: 'waiting',
    delivered: 'refused: not_in_flight',
    dead_lettered: 'refused: not_in_flight',
  },
  pause_shift: {
    open: 'open',
    waiting: 'waiting',
    retry_held: 'retry_held',
    in_flight: 'in_flight',
    delivered: 'refused: not_pending',
    dead_lettered: 'refused: not_pending',
  },
};

/** A payload of webhook shop in the state, in series 1, its window started an hour ago. */
async function payloadIn(state: State): Promise<number> {
  // A payload in flight has finished no attempt yet: its attempt is its in_flight row.
  const columns: Record<State, string> = {
    open: `'open', 0, null, null`,
    waiting: `'pending', 0, null, null`,
    retry_held: `'pending', 1, null, null`,
    in_flight: `'pending', 0, null, null`,
    delivered: `'delivered', 1, null, null`,
    dead_lettered: `'dead_lettered', 1, 'rejected', now()`,
  };
  const {
    rows: [row],
  } = await db.pool.query<{ payload_id: number }>(
    `insert into asset_webhooks.payloads (webhook_id, status, attempts, dead_letter_reason,
       dead_lettered_at, body, byte_size, event_count, event_ids, series_started_at)
     values ('shop', ${columns[state]}, '[]', 2, 0, '{}', now() - interval '1 hour')
     returning payload_id`,
  );
  const payloadId = row!.payload_id;
  if (state === 'delivered')
    await db.pool.query('update asset_webhooks.payloads set delivered_at = now() where payload_id = $1', [payloadId]);
  if (state === 'retry_held' || state === 'in_flight')
    await db.pool.query(
      `insert into asset_webhooks.in_flight (payload_id, webhook_id, series, attempt_no, started_at, next_attempt_at)
       values ($1, 'shop', 1, 1, now() - interval '1 minute', $2)`,
      [payloadId, state === 'retry_held' ? new Date(Date.now() + 60_000) : null],
    );
  if (state !== 'open' && state !== 'waiting' && state !== 'in_flight') {
    const outcome = { retry_held: 'retry', delivered: 'delivered', dead_lettered: 'rejected' }[state];
    await db.pool.query(
      `insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at, outcome)
       values ($1, 1, 1, now() - interval '1 minute', $2)`,
      [payloadId, outcome],
    );
  }
  return payloadId;
}

/** The transition of this kind for the payload, its fields by name (series 1, attempt 1). */
function transitionFor(kind: Kind, payloadId: number): Record<string, unknown> {
  const at = new Date().toISOString();
  switch (kind) {
    case 'attempt_result':
      return { kind, payload_id: payloadId, series: 1, attempt: 1, outcome: 'delivered', at, status_code: 200 };
    case 'interrupted':
      return {
        kind,
        payload_id: payloadId,
        series: 1,
        attempt: 1,
        outcome: 'retry',
        at,
        retry_in: '0 seconds',
        error_class: 'interrupted',
      };
    case 'expiry':
      return { kind, payload_id: payloadId, series: 1, at };
    case 'webhook_removed':
    case 'redelivery':
      return { kind, payload_id: payloadId, requested_by: 'table-test' };
    case 'replay':
      return { kind, payload_id: payloadId, requested_by: 'table-test', replay_id: 1 };
    case 'given_back':
      return { kind, payload_id: payloadId, series: 1, attempt: 1 };
    case 'pause_shift':
      return { kind, payload_id: payloadId, paused_since: new Date(Date.now() - 30 * 60_000).toISOString() };
  }
}

async function transition(
  rows: Array<Record<string, unknown>>,
): Promise<Array<{ applied: boolean; reason: string | null }>> {
  const { rows: answers } = await db.pool.query<{ applied: boolean; reason: string | null }>(
    `select applied, reason from asset_webhooks.transition_payloads(asset_webhooks.payload_transitions($1::jsonb[]))
     order by idx`,
    [rows],
  );
  return answers;
}

interface PayloadRow {
  state: State;
  series: number;
  started: Date;
}

async function payloadRows(ids: readonly number[]): Promise<Map<number, PayloadRow>> {
  const { rows } = await db.pool.query<{ payload_id: number; state: State; series: number; started: Date }>(
    `select p.payload_id, asset_webhooks.payload_state(p.status, f.payload_id is not null, f.next_attempt_at) as state,
            p.series, p.series_started_at as started
     from asset_webhooks.payloads p left join asset_webhooks.in_flight f using (payload_id)
     where p.payload_id = any($1::bigint[])`,
    [ids],
  );
  return new Map(rows.map((row) => [row.payload_id, { state: row.state, series: row.series, started: row.started }]));
}

beforeEach(async () => {
  await resetData(db.pool);
  await db.pool.query(
    `insert into asset_webhooks.webhooks (webhook_id, url, enabled, concurrency)
     values ('shop', 'http://127.0.0.1/', true, 4), ('crm', 'http://127.0.0.1/', true, 1)`,
  );
});

describe('transition_payloads', () => {
  it('takes every state to the state of the table, or refuses the transition, all in one batch', async () => {
    const pairs: Array<{ kind: Kind; state: State; payloadId: number }> = [];
    for (const kind of KINDS)
      for (const state of STATES) pairs.push({ kind, state, payloadId: await payloadIn(state) });
    const before = await payloadRows(pairs.map((pair) => pair.payloadId));
    const answers = await transition(pairs.map((pair) => transitionFor(pair.kind, pair.payloadId)));
    const after = await payloadRows(pairs.map((pair) => pair.payloadId));

    const outcome = (pair: (typeof pairs)[number], index: number): string => {
      const answer = answers[index]!;
      return answer.applied ? after.get(pair.payloadId)!.state : `refused: ${answer.reason}`;
    };
    const seen = Object.fromEntries(
      KINDS.map((kind) => [
        kind,
        Object.fromEntries(
          pairs.flatMap((pair, index) => (pair.kind === kind ? [[pair.state, outcome(pair, index)]] : [])),
        ),
      ]),
    );
    expect(seen).toEqual(TABLE);
    for (const [index, pair] of pairs.entries()) {
      const [was, is] = [before.get(pair.payloadId)!, after.get(pair.payloadId)!];
      if (!answers[index]!.applied) expect(is, `${pair.kind} on ${pair.state}`).toEqual(was);
      else if (pair.kind === 'redelivery' || pair.kind === 'replay') expect(is.series).toBe(was.series + 1);
      else if (pair.kind === 'pause_shift') expect(is.started.getTime()).toBeGreaterThan(was.started.getTime());
      else expect(is.series).toBe(was.series);
    }
  });

  it('records an attempt result that no longer applies as a plain failed try', async () => {
    const payloadId = await payloadIn('in_flight');
    const [removed] = await transition([transitionFor('webhook_removed', payloadId)]);
    expect(removed).toEqual({ applied: true, reason: null });
    const [late] = await applyTransitions(db.pool, [
      {
        kind: 'attempt_result',
        payloadId,
        series: 1,
        attemptNo: 1,
        outcome: 'delivered',
        at: new Date(),
        retryInMs: null,
        windowSeconds: null,
        durationMs: 12,
        statusCode: 200,
        errorClass: null,
        errorMessage: null,
        responseExcerpt: 'ok',
        sentAt: null,
        receiverFailed: false,
        holdWebhookForMs: null,
      },
    ]);
    expect(late).toEqual({ applied: false, reason: 'not_in_flight', outcome: null });
    const { rows } = await db.pool.query(
      `select p.status, p.dead_letter_reason, a.outcome, a.status_code, a.response_excerpt
       from asset_webhooks.payloads p join asset_webhooks.attempts a using (payload_id) where payload_id = $1`,
      [payloadId],
    );
    expect(rows).toEqual([
      {
        status: 'dead_lettered',
        dead_letter_reason: 'webhook_removed',
        outcome: 'retry',
        status_code: 200,
        response_excerpt: 'ok',
      },
    ]);
  });

  it('refuses a payload named twice (the first entry applies), an old series and an unknown payload', async () => {
    const [waiting, other] = [await payloadIn('waiting'), await payloadIn('waiting')];
    const answers = await transition([
      transitionFor('expiry', waiting),
      transitionFor('webhook_removed', waiting),
      { ...transitionFor('expiry', other), series: 2 },
      transitionFor('expiry', 999_999_999),
    ]);
    expect(answers).toEqual([
      { applied: true, reason: null },
      { applied: false, reason: 'named_earlier_in_batch' },
      { applied: false, reason: 'series_moved_on' },
      { applied: false, reason: 'no_such_payload' },
    ]);
    const rows = await payloadRows([waiting, other]);
    expect([rows.get(waiting)!.state, rows.get(other)!.state]).toEqual(['dead_lettered', 'waiting']);
  });

  it('fails the statement on a kind it does not know: a caller bug, not a refusal', async () => {
    const payloadId = await payloadIn('waiting');
    await expect(transition([{ kind: 'teleport', payload_id: payloadId }])).rejects.toThrow(/unknown transition kind/);
  });

  it('moves a redelivered payload to another webhook, recording where it came from', async () => {
    const payloadId = await payloadIn('dead_lettered');
    const [answer] = await redeliverPayloads(db.pool, [payloadId], { requestedBy: 'ops', toWebhookId: 'crm' });
    expect(answer).toEqual({ applied: true, reason: null, payloadId, series: 2 });
    const { rows } = await db.pool.query(
      `select p.webhook_id, p.status, p.attempts, r.requested_by, r.previous_reason, r.moved_from
       from asset_webhooks.payloads p join asset_webhooks.redeliveries r using (payload_id) where payload_id = $1`,
      [payloadId],
    );
    expect(rows).toEqual([
      {
        webhook_id: 'crm',
        status: 'pending',
        attempts: 0,
        requested_by: 'ops',
        previous_reason: 'rejected',
        moved_from: 'shop',
      },
    ]);
  });

  it('gives a claimed attempt back: its slot goes and the payload waits, no attempt counted', async () => {
    const payloadId = await payloadIn('in_flight');
    const [answer] = await transition([transitionFor('given_back', payloadId)]);
    expect(answer).toEqual({ applied: true, reason: null });
    const { rows } = await db.pool.query(
      `select p.attempts, (select count(*)::int from asset_webhooks.in_flight f where f.payload_id = p.payload_id) as slots,
              (select count(*)::int from asset_webhooks.attempts a where a.payload_id = p.payload_id) as rows
       from asset_webhooks.payloads p where payload_id = $1`,
      [payloadId],
    );
    expect(rows).toEqual([{ attempts: 0, slots: 0, rows: 0 }]);
  });

  it('puts the payload of a 410 under disableOnGone back in its queue and suspends its webhook, from the first 410', async () => {
    const [first, second] = [await payloadIn('in_flight'), await payloadIn('in_flight')];
    const earlier = new Date(Date.now() - 60_000);
    const gone = (payloadId: number, at: Date): Record<string, unknown> => ({
      kind: 'attempt_result',
      payload_id: payloadId,
      series: 1,
      attempt: 1,
      outcome: 'suspended',
      at: at.toISOString(),
      status_code: 410,
      window_seconds: 1,
    });
    // The window has passed: a retry would be expired, a suspension never is.
    const answers = await transition([gone(second, new Date()), gone(first, earlier)]);
    expect(answers).toEqual([
      { applied: true, reason: null },
      { applied: true, reason: null },
    ]);
    const after = await payloadRows([first, second]);
    expect([after.get(first)!.state, after.get(second)!.state]).toEqual(['waiting', 'waiting']);
    const { rows: attempts } = await db.pool.query<{ outcome: string }>(
      'select outcome from asset_webhooks.attempts where payload_id = any($1::bigint[])',
      [[first, second]],
    );
    expect(attempts).toEqual([{ outcome: 'suspended' }, { outcome: 'suspended' }]);
    const { rows: webhook } = await db.pool.query<{ gone_since: Date; paused_since: Date; gone_payload_id: number }>(
      "select gone_since, paused_since, gone_payload_id::int from asset_webhooks.webhooks where webhook_id = 'shop'",
    );
    expect(webhook).toEqual([{ gone_since: earlier, paused_since: earlier, gone_payload_id: first }]);

    // A resume of the document's pauses leaves it held; only resume_gone_webhook ends it, and moves the windows.
    await db.pool.query("select asset_webhooks.resume_webhooks('{}')");
    expect(
      (
        await db.pool.query(
          "select 1 from asset_webhooks.webhooks where webhook_id = 'shop' and paused_since is not null",
        )
      ).rowCount,
    ).toBe(1);
    const { rows: resumed } = await db.pool.query("select * from asset_webhooks.resume_gone_webhook('shop')");
    expect(resumed).toEqual([{ was_gone: true, resumed: true, waiting: 2 }]);
    const shifted = await payloadRows([first]);
    expect(shifted.get(first)!.started.getTime()).toBeGreaterThan(after.get(first)!.started.getTime() + 50_000);
    const { rows: cleared } = await db.pool.query(
      "select gone_since, paused_since, gone_payload_id from asset_webhooks.webhooks where webhook_id = 'shop'",
    );
    expect(cleared).toEqual([{ gone_since: null, paused_since: null, gone_payload_id: null }]);
    expect((await db.pool.query("select * from asset_webhooks.resume_gone_webhook('nobody')")).rows).toEqual([]);
  });

  it('keeps a webhook that its document pauses held when the operator ends its 410 suspension', async () => {
    await db.pool.query(
      "update asset_webhooks.webhooks set config_paused = true, paused_since = now(), gone_since = now() where webhook_id = 'crm'",
    );
    const { rows } = await db.pool.query("select * from asset_webhooks.resume_gone_webhook('crm')");
    expect(rows).toEqual([{ was_gone: true, resumed: false, waiting: 0 }]);
    const { rows: webhook } = await db.pool.query<{ held: boolean; gone: boolean }>(
      "select paused_since is not null as held, gone_since is not null as gone from asset_webhooks.webhooks where webhook_id = 'crm'",
    );
    expect(webhook).toEqual([{ held: true, gone: false }]);
  });
});
