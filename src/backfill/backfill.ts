import { randomUUID } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import { assignPayloadIds } from '../payloads/ids.js';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import type { WebhookConfig } from '../config/schema.js';
import { inTransaction } from '../db/transaction.js';
import { compileWebhook } from '../filters/compile.js';
import { assetStateFromRow, IN_TRASH_COLUMN } from '../db/asset-state.js';
import { isoTimestamp, serializeEvent } from '../payloads/serialize.js';
import { insertBackfillEvents } from '../payloads/events.js';
import { writePayloads } from '../payloads/store.js';
import {
  completeBackfill,
  findRunningBackfill,
  lockBackfill,
  recordChunk,
  startOrResumeBackfill,
  unlockBackfill,
  type BackfillRow,
} from './store.js';
import { changedSinceRead, missingAssets, readAssets } from './reads.js';
import { planWrite, type PendingEvent, type WritePlan } from './write-plan.js';

/**
 * A backfill: one EDITED event with a new eventId, to one webhook only, for
 * every asset of the binding's asset_state view (or each listed asset) that
 * is not in the Trash (the view's in_trash) and passes the webhook's checks
 * now, as coalescing would evaluate an EDITED of it (src/filters/compile.ts).
 * Receivers take an EDITED as the asset being back, so a trashed asset is
 * never sent. The event carries the asset's latest atom and, as
 * eventTimestamp, the time its state was read.
 *
 * The assets are read in ascending asset_id, a chunk at a time after the last
 * one done (keyset pagination): memory holds one read chunk and the events of
 * one write, whatever the number of assets. A write packs its events into
 * payloads of at most batchSize events and maxPayloadBytes (src/coalesce/pack.ts)
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
export interface BackfillOptions {
  readonly pool: pg.Pool;
  readonly webhook: WebhookConfig;
  readonly maxPayloadBytes: number;
  /** The listed assets, decimal strings; undefined for every asset. */
  readonly assetIds?: readonly string[] | undefined;
  /** Count what would be sent, change nothing. */
  readonly dryRun?: boolean;
  readonly requestedBy?: string;
  /** Called after each committed write (and, in a dry run, each read), for progress lines. */
  readonly onProgress?: (progress: BackfillProgress) => void;
  /** Once aborted, the backfill stops after the write in progress commits; run again to resume. */
  readonly signal?: AbortSignal;
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

export interface BackfillResult extends BackfillProgress {
  readonly webhookId: string;
  /** running: interrupted, resumable; completed: every asset done. A dry run reports what a run would leave. */
  readonly status: 'running' | 'completed';
  /** An earlier, interrupted backfill with these arguments was continued. */
  readonly resumed: boolean;
  readonly dryRun: boolean;
  /** Assets excluded by this run, by the check that excluded them (as event_outcomes names them). */
  readonly excludedBy: Readonly<Record<string, number>>;
  /** Listed assets that do not exist (the first 100), and how many. */
  readonly missing: readonly string[];
  readonly missingCount: number;
}

/** Events per write: a whole number of full payloads, about a thousand events. */
function eventsPerWrite(batchSize: number): number {
  return batchSize * Math.ceil(1000 / batchSize);
}

/** Assets read per query: one chunk in memory at a time. */
const READ_SIZE = 1000;

/** Assets read without enough events to fill a write, after which the position is committed anyway. */
const ASSETS_PER_WRITE = 20_000;

export async function backfill(options: BackfillOptions): Promise<BackfillResult> {
  const { pool, webhook } = options;
  const dryRun = options.dryRun === true;
  const listed =
    options.assetIds === undefined
      ? null
      : [...new Set(options.assetIds.map((id) => BigInt(id)))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).map(String);
  const compiled = compileWebhook(webhook);
  const limits = { batchSize: webhook.batchSize, maxPayloadBytes: options.maxPayloadBytes };
  const perWrite = eventsPerWrite(webhook.batchSize);

  const session = await pool.connect();
  let locked: number | null = null;
  try {
    let row: BackfillRow | null;
    let resumed: boolean;
    if (dryRun) {
      row = await findRunningBackfill(session, webhook.id, listed);
      resumed = row !== null;
    } else {
      const started = await startOrResumeBackfill(
        session,
        webhook.id,
        listed,
        options.requestedBy ?? `${os.userInfo().username}@${os.hostname()}`,
      );
      row = await lockBackfill(session, started.backfill);
      locked = row.backfillId;
      resumed = started.resumed;
    }
    const missing = listed === null ? { ids: [], count: 0 } : await missingAssets(session, listed);
    const totals = {
      backfillId: row?.backfillId ?? null,
      assetsRead: row?.assetsRead ?? 0,
      eventsSent: row?.eventsSent ?? 0,
      excluded: row?.excluded ?? 0,
      payloads: row?.payloads ?? 0,
      lastAssetId: row?.lastAssetId ?? null,
    };
    const excludedBy: Record<string, number> = {};
    let status: 'running' | 'completed' = row?.status ?? 'running';
    // What the command reports, from the totals as they stand when it ends.
    const result = (): BackfillResult => ({
      ...totals,
      webhookId: webhook.id,
      status,
      resumed,
      dryRun,
      excludedBy,
      missing: missing.ids,
      missingCount: missing.count,
    });
    if (status === 'completed') return result();

    // The events gathered for the next write. Each knows the asset read
    // before its own and the counts up to it, so a write can stop just before
    // any of them.
    let pending: PendingEvent[] = [];
    let pendingRead = 0;
    let pendingExcluded = 0;
    let readCursor = totals.lastAssetId;

    const plan = (completed: boolean): WritePlan =>
      planWrite({ webhookId: webhook.id, limits, pending, readCursor, pendingRead, pendingExcluded, completed });

    /** Turns the gathered events of assets gone or trashed since they were read into exclusions. */
    const leaveOut = (changed: ReadonlyMap<string, string>): void => {
      let dropped = 0;
      pending = pending.flatMap((event) => {
        const check = changed.get(event.assetId);
        if (check !== undefined) {
          dropped += 1;
          excludedBy[check] = (excludedBy[check] ?? 0) + 1;
          return [];
        }
        return [dropped === 0 ? event : { ...event, excludedBefore: event.excludedBefore + dropped }];
      });
      pendingExcluded += dropped;
    };

    /**
     * Commits what plan() cuts, in one transaction, leaving out the assets
     * purged or trashed since they were read (see backfill). A dry run
     * changes nothing and reads nothing again.
     */
    const write = async (completed: boolean): Promise<void> => {
      let cut = plan(completed);
      const from = totals.lastAssetId;
      if (!dryRun && (cut.position.lastAssetId !== from || completed)) {
        const backfillId = totals.backfillId!;
        await inTransaction(session, async (client) => {
          // The webhook's claim lock (see claim_payloads): no claim of it runs meanwhile.
          await client.query('select from asset_webhooks.webhooks w where w.webhook_id = $1 for no key update', [
            webhook.id,
          ]);
          // Ids first, the assets' state after: see backfill. Each pass leaves out at least one asset.
          for (;;) {
            await assignPayloadIds(client, cut.batches);
            const changed = await changedSinceRead(client, cut.events);
            if (changed.size === 0) break;
            leaveOut(changed);
            cut = plan(completed);
          }
          // What was left out may leave no full payload: nothing to commit.
          if (cut.position.lastAssetId === from && !completed) return;
          // Sealed, with no coalescing run.
          await writePayloads(client, null, cut.batches, isoTimestamp(new Date()));
          await insertBackfillEvents(client, backfillId, webhook, cut.events);
          if (cut.position.lastAssetId === null) await completeBackfill(client, backfillId);
          else {
            await recordChunk(client, backfillId, from, {
              lastAssetId: cut.position.lastAssetId,
              assetsRead: cut.position.read,
              eventsSent: cut.events.length,
              excluded: cut.position.excluded,
              payloads: cut.batches.length,
              completed,
            });
          }
        });
        if (cut.position.lastAssetId === from && !completed) return;
        // The pumps are woken once committed; if this fails, their next poll finds the payloads.
        if (cut.batches.length > 0) await announcePayloadsReady(pool).catch(() => {});
      }
      const { position, carried } = cut;
      totals.payloads += cut.batches.length;
      totals.assetsRead += position.read;
      totals.eventsSent += cut.events.length;
      totals.excluded += position.excluded;
      totals.lastAssetId = position.lastAssetId;
      pending = carried.map((event) => ({
        ...event,
        readBefore: event.readBefore - position.read,
        excludedBefore: event.excludedBefore - position.excluded,
      }));
      pendingRead -= position.read;
      pendingExcluded -= position.excluded;
      if (completed) status = 'completed';
      options.onProgress?.({ ...totals });
    };

    for (;;) {
      const rows = await readAssets(session, readCursor, listed, READ_SIZE);
      for (const state of rows) {
        const asset = assetStateFromRow(state);
        const check = state.in_trash === true ? IN_TRASH_COLUMN[0] : compiled.evaluate('EDITED', asset);
        if (check !== null) {
          pendingExcluded += 1;
          excludedBy[check] = (excludedBy[check] ?? 0) + 1;
        } else {
          const event = {
            eventId: randomUUID(),
            occurredAt: state.read_at,
            assetId: state.asset_key,
            assetUuid: asset.assetUuid,
            atomId: asset.latestAtomId,
          };
          const json = serializeEvent({
            ...event,
            eventTimestamp: event.occurredAt,
            assetId: asset.assetId,
            eventType: 'EDITED',
          });
          pending.push({
            ...event,
            json,
            previousAssetId: readCursor,
            readBefore: pendingRead,
            excludedBefore: pendingExcluded,
          });
        }
        pendingRead += 1;
        readCursor = state.asset_key;
      }
      if (rows.length < READ_SIZE) {
        await write(true);
        break;
      }
      if (pending.length >= perWrite || pendingRead >= ASSETS_PER_WRITE) await write(false);
      if (options.signal?.aborted) {
        await write(false);
        break;
      }
    }
    return result();
  } finally {
    if (locked !== null) await unlockBackfill(session, locked).catch(() => {});
    session.release();
  }
}
