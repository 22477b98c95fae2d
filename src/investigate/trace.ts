import { sql } from 'kysely';
import type pg from 'pg';
import { asIdText, operatorDb, type OperatorDatabase } from '../db/kysely.js';
import { UserError } from '../errors.js';
import type { DecimalId } from '../interfaces.js';
import { quotedPrefix } from '../text/printable.js';

export interface TraceAttempt {
  readonly series: number;
  readonly attempt: number;
  readonly startedAt: Date;
  readonly durationMs: number | null;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly outcome: string | null;
  /** For an attempt without a result that names its process: whether that process is gone (asset_webhooks.process_gone). */
  readonly processGone: boolean | null;
  /** False for a standby its process has claimed and not reported sent (asset_webhooks.in_flight.sent). */
  readonly sent: boolean;
}

export interface TraceRoute {
  readonly webhookId: string;
  readonly outcome: 'excluded' | 'collapsed' | 'pending' | 'delivered' | 'dead_lettered';
  /** For a mirror webhook that got the event as an UNMATCHED: the check the asset failed. */
  readonly excludedBy: string | null;
  readonly collapsedInto: string | null;
  /** The type the webhook got it as: the event's own, or UNMATCHED (a mirror webhook); null when not sent. */
  readonly sentAs: string | null;
  readonly payload: {
    readonly payloadId: number;
    readonly status: string;
    readonly createdAt: Date;
    readonly eventCount: number;
    /** The webhook the payload is sent to now: another than the route's after a redelivery moved it (`--to`). */
    readonly webhookId: string;
    /** The current series of attempts: 1, plus one per redelivery. */
    readonly series: number;
    readonly deadLetterReason: string | null;
    readonly deliveredAt: Date | null;
    readonly nextAttemptAt: Date | null;
    readonly attempts: readonly TraceAttempt[];
    /** While the payload waits: when its webhook was paused (asset_webhooks.webhooks.paused_since), else null. */
    readonly webhookPausedSince: Date | null;
    /**
     * While the payload waits: the webhook's suspension by a 410 Gone answer
     * (retry.disableOnGone; asset_webhooks.webhooks.gone_since), the payload
     * whose attempt got it, and whether its document pauses it too; else null.
     */
    readonly webhookGone: {
      readonly since: Date;
      readonly payloadId: number | null;
      readonly alsoPaused: boolean;
    } | null;
    /** While the payload waits: since when its webhook's rate limit has held it, and the rate in force; else null. */
    readonly webhookRateHeld: { readonly since: Date; readonly perSecond: number } | null;
    readonly redeliveries: ReadonlyArray<{
      series: number;
      requestedAt: Date;
      requestedBy: string;
      previousReason: string | null;
      movedFrom: string | null;
      /** The replay that started the series (`replay`); null for a redelivery of a dead letter. */
      replayId: number | null;
    }>;
  } | null;
}

export interface Trace {
  readonly eventId: string;
  readonly eventType: string;
  readonly assetId: DecimalId;
  readonly assetUuid: string | null;
  readonly occurredAt: Date;
  /** waiting: still in the outbox; coalesced: routed at coalescedAt. */
  readonly state: 'waiting' | 'coalesced';
  readonly coalescedAt: Date | null;
  readonly atomId: DecimalId | null;
  /** The backfill that wrote the event (it was not captured from a change); null for a captured event. */
  readonly backfillId: number | null;
  /** The reconcile that wrote the event (an EDITED or UNMATCHED of a mirror webhook); null otherwise. */
  readonly reconcileId: number | null;
  /** The trace context its transaction set (asset_webhooks.traceparent): delivery spans link to it. */
  readonly traceparent: string | null;
  readonly routes: readonly TraceRoute[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether a string has the shape of an eventId (a UUID, any case). */
export function isEventId(value: string): boolean {
  return UUID.test(value);
}

/** The life of one event: capture, per webhook its route, every attempt, and the final state. */
export async function traceEvent(pool: pg.Pool, eventId: string): Promise<Trace> {
  if (!isEventId(eventId))
    throw new UserError('invalid_event_id', `EVENT_ID: expected a UUID, got ${quotedPrefix(eventId)}`);
  const db = operatorDb(pool);
  const {
    rows: [waiting],
  } = await pool.query<
    Pick<
      OperatorDatabase['asset_webhooks.waiting_events'],
      'event_type' | 'asset_id' | 'asset_uuid' | 'occurred_at' | 'atom_id'
    >
  >(
    'select w.event_type, w.asset_id::text as asset_id, w.asset_uuid, w.occurred_at, w.atom_id::text as atom_id from asset_webhooks.find_waiting_event($1) w',
    [eventId],
  );
  if (waiting) {
    return {
      eventId,
      eventType: waiting.event_type,
      assetId: waiting.asset_id,
      assetUuid: waiting.asset_uuid,
      occurredAt: waiting.occurred_at,
      state: 'waiting',
      coalescedAt: null,
      atomId: waiting.atom_id,
      backfillId: null,
      reconcileId: null,
      traceparent: null,
      routes: [],
    };
  }
  const event = await db
    .selectFrom('asset_webhooks.events')
    .select([
      'event_type',
      'asset_uuid',
      'occurred_at',
      'coalesced_at',
      'backfill_id',
      'reconcile_id',
      'traceparent',
      asIdText('asset_id'),
      asIdText<'atom_id', DecimalId | null>('atom_id'),
    ])
    .where('event_id', '=', eventId)
    .executeTakeFirst();
  if (!event) {
    throw new UserError(
      'unknown_event',
      `event ${eventId}: expected an eventId captured within the retention period, got none (not in the outbox or the consumed events)`,
    );
  }
  const outcomes = await db
    .selectFrom('asset_webhooks.event_outcomes')
    .select(['webhook_id', 'outcome', 'excluded_by', 'collapsed_into', 'payload_id', 'sent_as'])
    .where('event_id', '=', eventId)
    .orderBy('webhook_id')
    .execute();
  const payloadIds = outcomes.map((row) => row.payload_id).filter((id): id is number => id !== null);
  const [payloads, attempts, redeliveries, pauses] =
    payloadIds.length === 0
      ? [[], [], [], []]
      : await Promise.all([
          db
            .selectFrom('asset_webhooks.payloads as p')
            .leftJoin('asset_webhooks.in_flight as f', 'f.payload_id', 'p.payload_id')
            .selectAll('p')
            .select('f.next_attempt_at')
            .where('p.payload_id', 'in', payloadIds)
            .execute(),
          db
            .selectFrom('asset_webhooks.attempts')
            .selectAll()
            .select(
              sql<
                boolean | null
              >`case when outcome is null and process_id is not null then asset_webhooks.process_gone(process_id) end`.as(
                'process_gone',
              ),
            )
            .where('payload_id', 'in', payloadIds)
            .orderBy('series')
            .orderBy('attempt_no')
            .execute(),
          db
            .selectFrom('asset_webhooks.redeliveries')
            .selectAll()
            .where('payload_id', 'in', payloadIds)
            .orderBy('series')
            .execute(),
          pool
            .query<{
              webhook_id: string;
              paused_since: Date | null;
              gone_since: Date | null;
              gone_payload_id: string | null;
              config_paused: boolean;
              rate_held_since: Date | null;
              rate_current: number | null;
            }>(
              `select w.webhook_id, w.paused_since, w.gone_since, w.gone_payload_id::text, w.config_paused,
                      q.rate_held_since, q.rate_current
               from asset_webhooks.webhooks w left join asset_webhooks.webhook_queues q using (webhook_id)
               where w.paused_since is not null or q.rate_held_since is not null`,
            )
            .then((result) => result.rows),
        ]);
  // The hold of the webhook a payload waits for: its pause, its suspension by a 410, or its rate limit.
  const waitingFor = (payload: { status: string; webhook_id: string }) =>
    payload.status === 'pending' || payload.status === 'open'
      ? pauses.find((w) => w.webhook_id === payload.webhook_id)
      : undefined;
  const goneOf = (hold: (typeof pauses)[number] | undefined) =>
    hold?.gone_since
      ? {
          since: hold.gone_since,
          payloadId: hold.gone_payload_id === null ? null : Number(hold.gone_payload_id),
          alsoPaused: hold.config_paused,
        }
      : null;
  const rateHeldOf = (hold: (typeof pauses)[number] | undefined) =>
    hold?.rate_held_since && hold.rate_current !== null
      ? { since: hold.rate_held_since, perSecond: hold.rate_current }
      : null;
  return {
    eventId,
    eventType: event.event_type,
    assetId: event.asset_id,
    assetUuid: event.asset_uuid,
    occurredAt: event.occurred_at,
    state: 'coalesced',
    coalescedAt: event.coalesced_at,
    atomId: event.atom_id,
    backfillId: event.backfill_id,
    reconcileId: event.reconcile_id,
    traceparent: event.traceparent,
    routes: outcomes.map((row) => {
      const payload = payloads.find((p) => p.payload_id === row.payload_id);
      return {
        webhookId: row.webhook_id,
        outcome: row.outcome,
        excludedBy: row.excluded_by,
        collapsedInto: row.collapsed_into,
        sentAs: row.sent_as,
        payload: payload
          ? {
              payloadId: payload.payload_id,
              webhookId: payload.webhook_id,
              status: payload.status,
              createdAt: payload.created_at,
              eventCount: payload.event_count,
              series: payload.series,
              deadLetterReason: payload.dead_letter_reason,
              deliveredAt: payload.delivered_at,
              nextAttemptAt: payload.next_attempt_at,
              attempts: attempts
                .filter((a) => a.payload_id === payload.payload_id)
                .map((a) => ({
                  series: a.series,
                  attempt: a.attempt_no,
                  startedAt: a.started_at,
                  durationMs: a.duration_ms,
                  statusCode: a.status_code,
                  error: a.error_class === null ? null : `${a.error_class}: ${a.error_message ?? ''}`,
                  outcome: a.outcome,
                  processGone: a.process_gone,
                  sent: a.sent,
                })),
              webhookPausedSince: waitingFor(payload)?.paused_since ?? null,
              webhookGone: goneOf(waitingFor(payload)),
              webhookRateHeld: rateHeldOf(waitingFor(payload)),
              redeliveries: redeliveries
                .filter((r) => r.payload_id === payload.payload_id)
                .map((r) => ({
                  series: r.series,
                  requestedAt: r.requested_at,
                  requestedBy: r.requested_by,
                  previousReason: r.previous_reason,
                  movedFrom: r.moved_from,
                  replayId: r.replay_id,
                })),
            }
          : null,
      };
    }),
  };
}
