import type pg from 'pg';

export interface Ledger {
  readonly balanced: boolean;
  /** Per webhook: captured, and what became of them. */
  readonly webhooks: Record<
    string,
    { captured: number; delivered: number; excluded: number; collapsed: number; deadLettered: number; pending: number }
  >;
  readonly waitingInOutbox: number;
}

/**
 * The balance of a run: for every webhook, events captured = delivered +
 * excluded + collapsed + dead-lettered, nothing still waiting. A run that does
 * not balance is void.
 */
export async function readLedger(pool: pg.Pool): Promise<Ledger> {
  const {
    rows: [captured],
  } = await pool.query<{ events: number; outbox: number }>(
    'select (select count(*) from asset_webhooks.events)::int as events, (select count(*) from asset_webhooks.outbox)::int as outbox',
  );
  const { rows } = await pool.query<{ webhook_id: string; outcome: string; n: number }>(
    'select webhook_id, outcome, count(*)::int as n from asset_webhooks.event_outcomes group by webhook_id, outcome',
  );
  const webhooks: Ledger['webhooks'] = {};
  for (const row of rows) {
    const entry = (webhooks[row.webhook_id] ??= {
      captured: captured!.events,
      delivered: 0,
      excluded: 0,
      collapsed: 0,
      deadLettered: 0,
      pending: 0,
    });
    if (row.outcome === 'delivered') entry.delivered += row.n;
    else if (row.outcome === 'excluded') entry.excluded += row.n;
    else if (row.outcome === 'collapsed') entry.collapsed += row.n;
    else if (row.outcome === 'dead_lettered') entry.deadLettered += row.n;
    else entry.pending += row.n;
  }
  const balanced =
    captured!.outbox === 0 &&
    Object.keys(webhooks).length > 0 &&
    Object.values(webhooks).every(
      (w) => w.pending === 0 && w.delivered + w.excluded + w.collapsed + w.deadLettered === w.captured,
    );
  return { balanced, webhooks, waitingInOutbox: captured!.outbox };
}
