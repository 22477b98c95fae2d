import { createHash } from 'node:crypto';
import type pg from 'pg';
import { inTransaction } from '../db/transaction.js';
import { eventTimestampText } from '../db/event-timestamp.js';

/** A mirror webhook's set, summed up so that a receiver can compare its copy (docs/mirror.md, "Comparing copies"). */
export interface MirrorDigest {
  readonly webhookId: string;
  /** How many assets the set holds. */
  readonly count: number;
  /** The SHA-256, in lowercase hex, of the lines `assetId TAB eventTimestamp LF`, sorted by assetId as bytes. */
  readonly digest: string;
}

/** The rows fetched from the cursor at a time: the set is hashed as it streams, never held whole. */
const FETCH_ROWS = 10_000;

/**
 * The set's lines in the digest's order: the asset id in decimal, and the
 * eventTimestamp of the last event sent to the webhook for it, as the payload
 * carried it (sent_at; migration 0004 filled it for the members before it).
 * last_event_at stands in for a row written without it, by hand.
 * `collate "C"` sorts by bytes, which is how every receiver's default string
 * sort orders decimal digits.
 */
const SET_LINES = `declare mirror_digest no scroll cursor for
  select m.asset_id::text || E'\\t' || coalesce(m.sent_at ->> $1,
           ${eventTimestampText('m.last_event_at')}) || E'\\n' as line
  from asset_webhooks.mirror_members m
  where $1 = any(m.webhooks)
  order by m.asset_id::text collate "C"`;

/**
 * The digest of a mirror webhook's set, read in one snapshot (repeatable
 * read), so a coalescing run that commits meanwhile is in it wholly or not
 * at all.
 */
export async function mirrorDigest(pool: pg.Pool, webhookId: string): Promise<MirrorDigest> {
  return inTransaction(
    pool,
    async (client) => {
      await client.query('set transaction read only');
      await client.query(SET_LINES, [webhookId]);
      const hash = createHash('sha256');
      let count = 0;
      for (;;) {
        const { rows } = await client.query<{ line: string }>(`fetch ${FETCH_ROWS} from mirror_digest`);
        for (const { line } of rows) hash.update(line);
        count += rows.length;
        if (rows.length < FETCH_ROWS) break;
      }
      return { webhookId, count, digest: hash.digest('hex') };
    },
    'repeatable read',
  );
}
