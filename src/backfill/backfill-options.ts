import type { WebhookConfig } from '../config/schema.js';
import type { SweepOptions, SweepOutcome } from '../sweep/sweep.js';

/**
 * A backfill: one EDITED event with a new eventId, to one webhook only, for
 * every asset of the binding's asset_state view (or each listed asset) that
 * is not in the Trash (the view's in_trash) and passes the webhook's checks
 * now, as coalescing would evaluate an EDITED of it (src/filters/compile.ts).
 * Receivers take an EDITED as the asset being back, so a trashed asset is
 * never sent. The event carries the asset's latest atom and, as
 * eventTimestamp, the time its state was read.
 *
 * A resumable sweep (src/sweep/sweep.ts): the assets are read in ascending
 * asset_id, a chunk at a time after the last one done (keyset pagination):
 * memory holds one read chunk and the events of one write, whatever the
 * number of assets. A write packs its events into
 * payloads of at most batchSize events and maxPayloadBytes (src/payloads/pack.ts)
 * and commits them, their events and the backfill's new position in one
 * transaction: a backfill interrupted at any point resumes, given the same
 * arguments, after the last committed asset, and sends no asset twice.
 *
 * Its payloads take ids from the payloads' sequence when written, so they
 * come after every payload already waiting for the webhook and are sent
 * after them, in order. They are written directly rather than through the
 * outbox: captured events of every other webhook never wait behind a
 * backfill, and a backfilled EDITED is never collapsed with a captured one.
 * Payloads that a coalescing run writes while a backfill goes on interleave
 * with the backfill's, each in order within itself.
 *
 * An asset purged or trashed after it was read must not get its EDITED after
 * its PURGED or DELETED: the receiver would take it as back. So a write draws
 * its payload ids first, then reads again, in a later statement, which of its
 * assets still exist outside the Trash, and leaves out the others. A change
 * committed after that read is coalesced by a run that starts after it, and
 * draws its payload ids after it, so its payload comes after the write's.
 * The write also holds the webhook's claim lock (claim_payloads skips a
 * webhook whose lock is taken) until it commits: a payload coalesced
 * meanwhile cannot be sent before the write's, which are not visible yet.
 */
export interface BackfillOptions extends SweepOptions<BackfillProgress> {
  readonly webhook: WebhookConfig;
  readonly maxPayloadBytes: number;
  /** The listed assets, decimal strings; undefined for every asset. */
  readonly assetIds?: readonly string[] | undefined;
}

export interface BackfillProgress {
  readonly backfillId: number | null;
  /** Totals of the backfill, earlier interrupted runs included. */
  readonly assetsRead: number;
  readonly eventsSent: number;
  readonly excluded: number;
  readonly payloads: number;
  /** Every asset up to this id is done. */
  readonly lastAssetId: string | null;
}

export interface BackfillResult extends BackfillProgress, SweepOutcome {
  readonly webhookId: string;
  /**
   * The assets excluded, by the check that excluded them (as event_outcomes
   * names them), over the whole backfill as its totals are: they add up to
   * excluded. Exclusions committed before migration 0003_sweeps count as
   * `unrecorded`.
   */
  readonly excludedBy: Readonly<Record<string, number>>;
  /** Listed assets that do not exist (the first 100), and how many. */
  readonly missing: readonly string[];
  readonly missingCount: number;
}
