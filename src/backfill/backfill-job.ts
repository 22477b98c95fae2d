import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { assetStateFromRow, IN_TRASH_COLUMN } from '../db/asset-state.js';
import { inTransaction } from '../db/transaction.js';
import { compileWebhook, type CompiledWebhook } from '../filters/compile.js';
import { assignPayloadIds } from '../payloads/ids.js';
import { isoTimestamp, serializeEvent } from '../payloads/serialize.js';
import { writePayloads } from '../payloads/store.js';
import { readAssetChunk, type SweptAsset } from '../sweep/assets.js';
import { insertSweptEvents } from '../sweep/events.js';
import { recordSweepChunk } from '../sweep/record.js';
import type { SweepJob, SweepStart, SweepStep } from '../sweep/sweep.js';
import type { BackfillOptions, BackfillProgress } from './backfill-options.js';
import { changedSinceRead, missingAssets } from './reads.js';
import { BACKFILL_RECORD, findRunningBackfill, startOrResumeBackfill, type BackfillRow } from './store.js';
import { planWrite, type PendingEvent, type WritePlan } from './write-plan.js';

/** Events per write: a whole number of full payloads, about a thousand events. */
function eventsPerWrite(batchSize: number): number {
  return batchSize * Math.ceil(1000 / batchSize);
}

/** Assets read per query: one chunk in memory at a time. */
const READ_SIZE = 1000;

/** Assets read without enough events to fill a write, after which the position is committed anyway. */
const ASSETS_PER_WRITE = 20_000;

/** A backfill's totals and the checks that excluded its assets, as committed (see backfill). */
interface Committed extends BackfillProgress {
  readonly excludedBy: Readonly<Record<string, number>>;
}

/** What a backfill selects (the assets, read in chunks) and sends (their EDITED), for runSweep. */
export class BackfillJob implements SweepJob<BackfillProgress> {
  readonly kind = 'backfill';
  readonly webhookId: string;
  /** The listed assets, distinct and ascending; null for every asset. */
  readonly listed: readonly string[] | null;
  /** Listed assets that do not exist (the first 100), and how many. */
  missing: { readonly ids: readonly string[]; readonly count: number } = { ids: [], count: 0 };
  private committed: Committed;
  private dryRun = true;
  private readonly compiled: CompiledWebhook;
  private readonly perWrite: number;
  // The events gathered for the next write. Each knows the asset read
  // before its own and the counts up to it, so a write can stop just before
  // any of them.
  private pending: PendingEvent[] = [];
  private pendingRead = 0;
  /** The checks that excluded the assets read since the last write, in the order they were read. */
  private pendingExclusions: string[] = [];
  /** The last asset read. */
  private readCursor: string | null = null;

  constructor(private readonly options: BackfillOptions) {
    this.webhookId = options.webhook.id;
    this.listed =
      options.assetIds === undefined
        ? null
        : [...new Set(options.assetIds.map((id) => BigInt(id)))]
            .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
            .map(String);
    this.compiled = compileWebhook(options.webhook);
    this.perWrite = eventsPerWrite(options.webhook.batchSize);
    this.committed = committedOf(null);
  }

  async begin(session: pg.PoolClient, context: { dryRun: boolean; requestedBy: string }): Promise<SweepStart> {
    this.dryRun = context.dryRun;
    let row: BackfillRow | null;
    let resumed: boolean;
    if (context.dryRun) {
      row = await findRunningBackfill(session, this.webhookId, this.listed);
      resumed = row !== null;
    } else {
      ({ backfill: row, resumed } = await startOrResumeBackfill(
        session,
        this.webhookId,
        this.listed,
        context.requestedBy,
      ));
    }
    this.committed = committedOf(row);
    this.readCursor = this.committed.lastAssetId;
    if (this.listed !== null) this.missing = await missingAssets(session, this.listed);
    return { resumed };
  }

  async step(session: pg.PoolClient, stopping: () => boolean): Promise<SweepStep> {
    const rows = await readAssetChunk(session, this.readCursor, this.listed, READ_SIZE);
    this.gather(rows);
    const completed = rows.length < READ_SIZE;
    const full = this.pending.length >= this.perWrite || this.pendingRead >= ASSETS_PER_WRITE;
    if (!completed && !full && !stopping()) return { completed, advanced: false, wrote: false };
    const cut = await this.write(session, completed);
    return { completed, advanced: cut !== null, wrote: !this.dryRun && cut !== null && cut.batches.length > 0 };
  }

  progress(): BackfillProgress {
    const { excludedBy: _, ...totals } = this.committed;
    return totals;
  }

  /** The assets excluded over the whole backfill, by check, as committed: they add up to its excluded. */
  get excludedBy(): Readonly<Record<string, number>> {
    return this.committed.excludedBy;
  }

  /** Decides each asset read: excluded by the check that excludes it, or an EDITED gathered for the next write. */
  private gather(rows: readonly SweptAsset[]): void {
    for (const state of rows) {
      const asset = assetStateFromRow(state);
      const check = state.in_trash === true ? IN_TRASH_COLUMN[0] : this.compiled.evaluate('EDITED', asset);
      if (check !== null) this.pendingExclusions.push(check);
      else {
        const event = {
          eventId: randomUUID(),
          eventType: 'EDITED' as const,
          occurredAt: state.read_at,
          assetId: state.asset_key,
          assetUuid: asset.assetUuid,
          atomId: asset.latestAtomId,
          seen: null,
        };
        this.pending.push({
          ...event,
          json: serializeEvent({ ...event, eventTimestamp: event.occurredAt, assetId: asset.assetId }),
          previousAssetId: this.readCursor,
          readBefore: this.pendingRead,
          excludedBefore: this.pendingExclusions.length,
        });
      }
      this.pendingRead += 1;
      this.readCursor = state.asset_key;
    }
  }

  private plan(completed: boolean): WritePlan {
    return planWrite({
      webhookId: this.webhookId,
      limits: { batchSize: this.options.webhook.batchSize, maxPayloadBytes: this.options.maxPayloadBytes },
      pending: this.pending,
      readCursor: this.readCursor,
      pendingRead: this.pendingRead,
      pendingExcluded: this.pendingExclusions.length,
      completed,
    });
  }

  /**
   * Commits what plan() cuts, in one transaction (a dry run changes nothing
   * and reads nothing again), and moves the totals past it. Returns what
   * was committed, or null when nothing was.
   */
  private async write(session: pg.PoolClient, completed: boolean): Promise<WritePlan | null> {
    let cut: WritePlan | null = this.plan(completed);
    if (!this.dryRun) {
      if (cut.position.lastAssetId === this.committed.lastAssetId && !completed) return null;
      cut = await inTransaction(session, (client) => this.commit(client, completed));
      if (cut === null) return null;
    }
    this.advance(cut, this.after(cut));
    return cut;
  }

  /**
   * The write's transaction, leaving out the assets purged or trashed since
   * they were read (see backfill); null when what is left out leaves no full
   * payload, and nothing to commit.
   */
  private async commit(client: pg.PoolClient, completed: boolean): Promise<WritePlan | null> {
    const from = this.committed.lastAssetId;
    // The webhook's claim lock (see claim_payloads): no claim of it runs meanwhile.
    await client.query('select from asset_webhooks.webhooks w where w.webhook_id = $1 for no key update', [
      this.webhookId,
    ]);
    let cut = this.plan(completed);
    // Ids first, the assets' state after: see backfill. Each pass leaves out at least one asset.
    for (;;) {
      await assignPayloadIds(client, cut.batches);
      const changed = await changedSinceRead(client, cut.events);
      if (changed.size === 0) break;
      this.leaveOut(changed);
      cut = this.plan(completed);
    }
    if (cut.position.lastAssetId === from && !completed) return null;
    const backfillId = this.committed.backfillId!;
    // Sealed, with no coalescing run.
    await writePayloads(client, null, cut.batches, isoTimestamp(new Date()));
    await insertSweptEvents(client, { kind: 'backfill', id: backfillId }, this.options.webhook, cut.events);
    const after = this.after(cut);
    await recordSweepChunk(client, BACKFILL_RECORD, backfillId, {
      from: { last_asset_id: from },
      to: {
        last_asset_id: after.lastAssetId,
        assets_read: after.assetsRead,
        events_sent: after.eventsSent,
        excluded: after.excluded,
        payloads: after.payloads,
        excluded_by: JSON.stringify(after.excludedBy),
      },
      completed,
    });
    return cut;
  }

  /** Turns the gathered events of assets gone or trashed since they were read into exclusions, in read order. */
  private leaveOut(changed: ReadonlyMap<string, string>): void {
    let dropped = 0;
    this.pending = this.pending.flatMap((event) => {
      const check = changed.get(event.assetId);
      if (check !== undefined) {
        this.pendingExclusions.splice(event.excludedBefore + dropped, 0, check);
        dropped += 1;
        return [];
      }
      return [dropped === 0 ? event : { ...event, excludedBefore: event.excludedBefore + dropped }];
    });
  }

  /** The totals once `cut` is committed. */
  private after(cut: WritePlan): Committed {
    const { position } = cut;
    const excludedBy = { ...this.committed.excludedBy };
    for (const check of this.pendingExclusions.slice(0, position.excluded))
      excludedBy[check] = (excludedBy[check] ?? 0) + 1;
    return {
      backfillId: this.committed.backfillId,
      assetsRead: this.committed.assetsRead + position.read,
      eventsSent: this.committed.eventsSent + cut.events.length,
      excluded: this.committed.excluded + position.excluded,
      payloads: this.committed.payloads + cut.batches.length,
      lastAssetId: position.lastAssetId,
      excludedBy,
    };
  }

  /** Moves past a committed cut: what it carried stays gathered for the next write. */
  private advance(cut: WritePlan, after: Committed): void {
    const { position, carried } = cut;
    this.committed = after;
    this.pending = carried.map((event) => ({
      ...event,
      readBefore: event.readBefore - position.read,
      excludedBefore: event.excludedBefore - position.excluded,
    }));
    this.pendingRead -= position.read;
    this.pendingExclusions = this.pendingExclusions.slice(position.excluded);
  }
}

/** The totals of a backfill's row; a dry run with nothing running starts from zero. */
function committedOf(row: BackfillRow | null): Committed {
  return {
    backfillId: row?.backfillId ?? null,
    assetsRead: row?.assetsRead ?? 0,
    eventsSent: row?.eventsSent ?? 0,
    excluded: row?.excluded ?? 0,
    payloads: row?.payloads ?? 0,
    lastAssetId: row?.lastAssetId ?? null,
    excludedBy: row?.excludedBy ?? {},
  };
}
