import { sql } from 'kysely';
import type pg from 'pg';
import { asIdText, operatorDb, type OperatorDatabase } from '../db/kysely.js';
import { UserError } from '../errors.js';
import type { DecimalId } from '../interfaces.js';
import { NAMELESS_ATTEMPT_AFTER_SECONDS } from '../delivery/recover.js';

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
  /** False for a standby its process has claimed and not reported sent (asset_webhooks.attempts.sent). */
  readonly sent: boolean;
}

export interface TraceRoute {
  readonly webhookId: string;
  readonly outcome: 'excluded' | 'collapsed' | 'pending' | 'delivered' | 'dead_lettered';
  readonly excludedBy: string | null;
  readonly collapsedInto: string | null;
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
    readonly redeliveries: ReadonlyArray<{
      series: number;
      requestedAt: Date;
      requestedBy: string;
      previousReason: string | null;
      movedFrom: string | null;
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
    throw new UserError('invalid_event_id', `EVENT_ID: expected a UUID, got ${JSON.stringify(eventId)}`);
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
    .select(['webhook_id', 'outcome', 'excluded_by', 'collapsed_into', 'payload_id'])
    .where('event_id', '=', eventId)
    .orderBy('webhook_id')
    .execute();
  const payloadIds = outcomes.map((row) => row.payload_id).filter((id): id is number => id !== null);
  const [payloads, attempts, redeliveries, pauses] =
    payloadIds.length === 0
      ? [[], [], [], []]
      : await Promise.all([
          db.selectFrom('asset_webhooks.payloads').selectAll().where('payload_id', 'in', payloadIds).execute(),
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
            .query<{ webhook_id: string; paused_since: Date }>(
              'select webhook_id, paused_since from asset_webhooks.webhooks where paused_since is not null',
            )
            .then((result) => result.rows),
        ]);
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
    routes: outcomes.map((row) => {
      const payload = payloads.find((p) => p.payload_id === row.payload_id);
      return {
        webhookId: row.webhook_id,
        outcome: row.outcome,
        excludedBy: row.excluded_by,
        collapsedInto: row.collapsed_into,
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
              webhookPausedSince:
                payload.status === 'pending' || payload.status === 'open'
                  ? (pauses.find((w) => w.webhook_id === payload.webhook_id)?.paused_since ?? null)
                  : null,
              redeliveries: redeliveries
                .filter((r) => r.payload_id === payload.payload_id)
                .map((r) => ({
                  series: r.series,
                  requestedAt: r.requested_at,
                  requestedBy: r.requested_by,
                  previousReason: r.previous_reason,
                  movedFrom: r.moved_from,
                })),
            }
          : null,
      };
    }),
  };
}

/** The trace in words an operator reads at 3 a.m. */
export function renderTrace(trace: Trace): string {
  const lines = [
    `event ${trace.eventId}: ${trace.eventType} of asset ${trace.assetId}${trace.assetUuid ? ` (${trace.assetUuid})` : ''}`,
    `  occurred at ${trace.occurredAt.toISOString()}`,
  ];
  if (trace.state === 'waiting') {
    lines.push('  captured, waiting for the next coalescing run (no webhook has seen it yet)');
    return lines.join('\n');
  }
  if (trace.backfillId !== null) {
    lines.push(
      `  BACKFILLED: written by backfill ${trace.backfillId} at ${trace.coalescedAt!.toISOString()}${trace.atomId !== null ? `, atomId ${trace.atomId}` : ''}` +
        " (not a captured change: the asset passed the webhook's checks when the backfill read it; sent to that webhook only)",
    );
  } else {
    lines.push(
      `  coalesced at ${trace.coalescedAt!.toISOString()}${trace.atomId !== null ? `, atomId ${trace.atomId}` : ''}`,
    );
  }
  if (trace.routes.length === 0) lines.push('  no webhook was configured when it was coalesced');
  for (const route of trace.routes) {
    if (route.outcome === 'excluded') {
      lines.push(`  ${route.webhookId}: not sent, excluded by ${route.excludedBy}${describeCheck(route.excludedBy)}`);
    } else if (route.outcome === 'collapsed') {
      lines.push(`  ${route.webhookId}: not sent on its own, collapsed into the later edit ${route.collapsedInto}`);
    } else if (route.payload) {
      const p = route.payload;
      const final =
        p.status === 'delivered'
          ? `delivered at ${p.deliveredAt?.toISOString()}`
          : p.status === 'dead_lettered'
            ? `DEAD-LETTERED (${p.deadLetterReason}); redeliver with: asset-webhooks dead-letters redeliver ${p.payloadId}`
            : p.webhookPausedSince
              ? `pending, waiting: webhook paused since ${p.webhookPausedSince.toISOString()}` +
                ' (sent in order once paused is false again; the time paused does not count towards expiry)'
              : p.nextAttemptAt
                ? `pending, next attempt at ${p.nextAttemptAt.toISOString()}`
                : 'pending, waiting for its turn';
      const moved = p.webhookId === route.webhookId ? '' : `, moved to webhook ${p.webhookId}`;
      lines.push(
        `  ${route.webhookId}: in payload ${p.payloadId} (${p.eventCount} events, created ${p.createdAt.toISOString()}${moved}): ${final}`,
      );
      // Attempts in order of series: a redelivery starts a new series, numbered from attempt 1 again.
      for (let series = 1; series <= p.series; series += 1) {
        const redelivery = p.redeliveries.find((r) => r.series === series);
        if (redelivery) {
          // Sent to the webhook that the next move took it from, or where it is now.
          const to = p.redeliveries.find((r) => r.series > series && r.movedFrom !== null)?.movedFrom ?? p.webhookId;
          const move =
            redelivery.movedFrom === null ? '' : ` to webhook ${to} (moved from webhook ${redelivery.movedFrom})`;
          lines.push(
            `    redelivered as series ${series}${move}, requested by ${redelivery.requestedBy} at ${redelivery.requestedAt.toISOString()}` +
              ` (series ${series - 1} had ended ${redelivery.previousReason ?? 'dead-lettered'})`,
          );
        }
        for (const a of p.attempts.filter((attempt) => attempt.series === series)) {
          const result = a.statusCode !== null ? `HTTP ${a.statusCode}` : (a.error ?? 'no result recorded yet');
          lines.push(
            `    attempt ${a.attempt}${p.series > 1 ? ` of series ${series}` : ''} at ${a.startedAt.toISOString()}: ${result}` +
              `${a.durationMs !== null ? ` in ${a.durationMs} ms` : ''} -> ${a.outcome ?? inProgress(a)}`,
          );
        }
      }
    }
  }
  return lines.join('\n');
}

/** An attempt without a result: the request is still out, or its process died and crash recovery closes it. */
function inProgress(attempt: TraceAttempt): string {
  if (!attempt.sent) {
    return attempt.processGone === true
      ? 'claimed as a standby and never sent: its run process is gone; a running service puts the payload back in its queue without counting the attempt'
      : "claimed as a standby, not sent yet (sent when one of its run process's requests to the webhook ends)";
  }
  if (attempt.processGone === false) return 'in progress (its run process is alive)';
  if (attempt.processGone === true) {
    return (
      'interrupted: its run process is gone; a running service closes the attempt and sends the payload again' +
      ' once the attempt is older than the request timeout plus 5 s'
    );
  }
  const handBack = new Date(attempt.startedAt.getTime() + NAMELESS_ATTEMPT_AFTER_SECONDS * 1000).toISOString();
  return `in progress (if its process stopped, the attempt is closed and the payload sent again from about ${handBack})`;
}

function describeCheck(check: string | null): string {
  switch (check) {
    case 'disabled':
      return ' (the webhook was disabled)';
    case 'resource_type':
      return " (the asset's supertype is not in resourceTypes)";
    case 'event_type':
      return ' (the event type is not in eventTypes)';
    case 'parent':
      return ' (a child asset; only top-level assets pass without a parentId filter)';
    case 'asset_gone':
      return ' (the asset no longer existed when the event was coalesced)';
    default:
      return check?.startsWith('filter:')
        ? ` (filter group ${check.slice(7)} of the webhook did not pass; try asset-webhooks explain)`
        : '';
  }
}
