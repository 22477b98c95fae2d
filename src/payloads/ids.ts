import type pg from 'pg';
import type { Batch } from './pack.js';

/**
 * Gives every batch that has no payload id yet one from the payloads' identity
 * sequence, so routes can name their payload before anything is written.
 */
export async function assignPayloadIds(client: pg.PoolClient, batches: readonly Batch[]): Promise<void> {
  const missing = batches.filter((batch) => batch.payloadId === null);
  if (missing.length > 0) assignIds(missing, await nextPayloadIds(client, missing.length));
}

/** Gives `batches` the first of `ids`, in order. */
function assignIds(batches: readonly Batch[], ids: readonly number[]): void {
  batches.forEach((batch, index) => {
    batch.payloadId = ids[index]!;
  });
}

async function nextPayloadIds(client: pg.PoolClient, count: number): Promise<number[]> {
  const { rows } = await client.query<{ id: number }>(
    `select nextval(pg_get_serial_sequence('asset_webhooks.payloads', 'payload_id')) as id
     from generate_series(1, $1::int)`,
    [count],
  );
  return rows.map((row) => row.id);
}

/**
 * Payload ids taken from the sequence ahead of need, a block at a time, so
 * that a coalescing run names its payloads without a statement per chunk. Ids
 * taken and never used leave gaps, as any rolled-back nextval does. The ids
 * of one run still rise in the order it writes its payloads; a backfill
 * writing meanwhile draws ids of its own, and the two interleave, each in
 * order within itself (see backfill).
 */
export class PayloadIdBlock {
  private ids: number[] = [];

  /** `client` draws the blocks: the run's session, so that a run needs no connection beyond its two. */
  constructor(
    private readonly client: pg.PoolClient,
    private readonly blockSize = 1024,
  ) {}

  /** As assignPayloadIds, from the block; fetches another block only when this one runs out. */
  async assign(batches: readonly Batch[]): Promise<void> {
    const missing = batches.filter((batch) => batch.payloadId === null);
    if (missing.length > this.ids.length)
      this.ids.push(...(await nextPayloadIds(this.client, Math.max(this.blockSize, missing.length - this.ids.length))));
    assignIds(missing, this.ids.splice(0, missing.length));
  }
}
