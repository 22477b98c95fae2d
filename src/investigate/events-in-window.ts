import type pg from 'pg';
import { asIdText, operatorDb } from '../db/kysely.js';
import type { DecimalId } from '../interfaces.js';

export interface WindowEvent {
  readonly eventId: string;
  readonly eventType: string;
  readonly assetId: DecimalId;
  readonly occurredAt: Date;
  /** Per webhook: outcome (with check or payload); empty while still waiting in the outbox. */
  readonly outcomes: ReadonlyArray<{
    webhookId: string;
    outcome: string;
    excludedBy: string | null;
    payloadId: number | null;
    /** UNMATCHED when a mirror webhook got the event as one; else the event's own type, or null when not sent. */
    sentAs: string | null;
    /** The last replay that sent the payload again (`replay`), and the payload's series now; null when none did. */
    replay: { replayId: number; series: number } | null;
  }>;
  readonly waiting: boolean;
  /** The backfill that wrote the event; null for a captured one. */
  readonly backfillId: number | null;
  /** The reconcile that wrote the event; null for a captured one. */
  readonly reconcileId: number | null;
}

/** The events that occurred in [from, to), with their outcome per webhook, in order of occurrence. */
export async function eventsInWindow(
  pool: pg.Pool,
  filter: { from: Date; to: Date; webhookId?: string | undefined; assetId?: DecimalId | undefined },
): Promise<WindowEvent[]> {
  const db = operatorDb(pool);
  let outcomes = db
    .selectFrom('asset_webhooks.event_outcomes')
    .select([
      'event_id',
      'event_type',
      'occurred_at',
      'webhook_id',
      'outcome',
      'excluded_by',
      'payload_id',
      'backfill_id',
      'reconcile_id',
      'sent_as',
      asIdText('asset_id'),
    ])
    .where('occurred_at', '>=', filter.from)
    .where('occurred_at', '<', filter.to);
  if (filter.webhookId !== undefined) outcomes = outcomes.where('webhook_id', '=', filter.webhookId);
  if (filter.assetId !== undefined) outcomes = outcomes.where('asset_id', '=', filter.assetId);
  let waiting = db
    .selectFrom('asset_webhooks.waiting_events')
    .select(['event_id', 'event_type', 'occurred_at', 'seq', asIdText('asset_id')])
    .where('occurred_at', '>=', filter.from)
    .where('occurred_at', '<', filter.to);
  if (filter.assetId !== undefined) waiting = waiting.where('asset_id', '=', filter.assetId);
  const [rows, pending] = await Promise.all([
    outcomes.orderBy('occurred_at').orderBy('event_id').orderBy('webhook_id').limit(100_000).execute(),
    waiting.orderBy('seq').limit(100_000).execute(),
  ]);
  const replays = await replaysOf(pool, [...new Set(rows.map((row) => row.payload_id).filter((id) => id !== null))]);
  const byEvent = new Map<string, WindowEvent & { outcomes: WindowEvent['outcomes'][number][] }>();
  for (const row of rows) {
    let entry = byEvent.get(row.event_id);
    if (!entry) {
      entry = {
        eventId: row.event_id,
        eventType: row.event_type,
        assetId: row.asset_id,
        occurredAt: row.occurred_at,
        outcomes: [],
        waiting: false,
        backfillId: row.backfill_id,
        reconcileId: row.reconcile_id,
      };
      byEvent.set(row.event_id, entry);
    }
    entry.outcomes.push({
      webhookId: row.webhook_id,
      outcome: row.outcome,
      excludedBy: row.excluded_by,
      payloadId: row.payload_id,
      sentAs: row.sent_as,
      replay: row.payload_id === null ? null : (replays.get(row.payload_id) ?? null),
    });
  }
  const events: WindowEvent[] = [...byEvent.values()];
  for (const row of pending) {
    events.push({
      eventId: row.event_id,
      eventType: row.event_type,
      assetId: row.asset_id,
      occurredAt: row.occurred_at,
      outcomes: [],
      waiting: true,
      backfillId: null,
      reconcileId: null,
    });
  }
  return events.sort((a, b) => a.occurredAt.getTime() - b.occurredAt.getTime());
}

/** The last replay of each payload that one has sent again, with the payload's series now. */
async function replaysOf(
  pool: pg.Pool,
  payloadIds: readonly number[],
): Promise<Map<number, { replayId: number; series: number }>> {
  if (payloadIds.length === 0) return new Map();
  const { rows } = await pool.query<{ payload_id: number; replay_id: number; series: number }>(
    `select p.payload_id, r.replay_id, p.series
     from asset_webhooks.payloads p
     cross join lateral (select r.replay_id from asset_webhooks.redeliveries r
                         where r.payload_id = p.payload_id and r.replay_id is not null
                         order by r.series desc limit 1) r
     where p.payload_id = any($1::bigint[]) and p.series > 1`,
    [payloadIds],
  );
  return new Map(rows.map((row) => [row.payload_id, { replayId: row.replay_id, series: row.series }]));
}

export function renderEvents(events: readonly WindowEvent[]): string {
  if (events.length === 0) return 'no events in this window';
  return events
    .map((event) => {
      const head =
        `${event.occurredAt.toISOString()}  ${event.eventId}  ${event.eventType.padEnd(9)} asset ${event.assetId}` +
        (event.backfillId !== null ? `  (backfill ${event.backfillId})` : '') +
        (event.reconcileId !== null ? `  (reconcile ${event.reconcileId})` : '');
      if (event.waiting) return `${head}\n    captured, waiting for the next coalescing run`;
      const outcomes = event.outcomes.map(
        (o) =>
          `    ${o.webhookId}: ${o.outcome}${o.sentAs === 'UNMATCHED' && event.eventType !== 'UNMATCHED' ? ' as UNMATCHED' : ''}` +
          `${o.excludedBy ? ` (${o.excludedBy})` : ''}${o.payloadId !== null ? ` payload ${o.payloadId}` : ''}` +
          `${o.replay ? `, replayed by replay ${o.replay.replayId} (series ${o.replay.series})` : ''}`,
      );
      return [head, ...outcomes].join('\n');
    })
    .join('\n');
}
