import { createHash } from 'node:crypto';
import type pg from 'pg';
import { Packer } from '../payloads/pack.js';
import { withCoalesceLock } from '../coalesce/coalesce-lock.js';
import type { RoutedWebhook } from '../coalesce/routed-webhooks.js';
import { routedWebhooks } from '../coalesce/routed-webhooks.js';
import { SeenValues } from '../coalesce/seen.js';
import type { WebhookConfig } from '../config/schema.js';
import { inTransaction } from '../db/transaction.js';
import { compileWebhook } from '../filters/compile.js';
import { assignPayloadIds } from '../payloads/ids.js';
import { isoTimestamp } from '../payloads/serialize.js';
import { writePayloads } from '../payloads/store.js';
import { insertSweptEvents } from '../sweep/events.js';
import { recordSweepChunk } from '../sweep/record.js';
import { runSweep, type SweepJob, type SweepOptions, type SweepOutcome, type SweepStep } from '../sweep/sweep.js';
import { writeMemberChanges } from './members.js';
import { decideAssets, decideGone, type DecidedChunk, type ReconcileChecks } from './reconcile-chunk.js';
import { NO_PROGRESS, RECONCILE_RECORD, startOrResumeReconcile, type ReconcileTotals } from './reconcile-store.js';

/**
 * A reconcile makes a mirror webhook's set (asset_webhooks.mirror_members)
 * what its checks give now, and tells the receiver the difference:
 *  - an EDITED with a new eventId for each asset that passes the checks (as
 *    an EDITED of it would), is not in the Trash and is not in the set;
 *  - an UNMATCHED for each asset of the set that no longer passes them, and,
 *    in a second phase, for each asset of the set that no longer exists
 *    (its PURGED never reached the webhook: sent while it was disabled);
 *  - for an asset of the set whose Trash state is not the one the last event
 *    sent to the webhook told, an UNMATCHED (in the Trash) or an EDITED
 *    (active and passing): see decideAssets.
 *
 * A resumable sweep (src/sweep/sweep.ts). Each chunk reads its assets,
 * decides, and writes its payloads, events, membership and position in one
 * transaction that holds the coalescing lock (src/coalesce/run.ts): no
 * coalescing run routes meanwhile, so membership has one writer, the
 * chunk's payloads come after every payload routed before it and before
 * every one routed after it, and a change committed after its read is
 * routed after it, from the set the chunk left. The set itself keeps an
 * interrupted reconcile from sending an asset twice; the position only
 * saves reading again what is done.
 */
export interface ReconcileOptions extends SweepOptions<ReconcileProgress> {
  readonly webhook: WebhookConfig;
  readonly maxPayloadBytes: number;
}

/** Totals of the reconcile, earlier interrupted runs included, and its position. */
export type ReconcileProgress = ReconcileTotals;

export interface ReconcileResult extends ReconcileProgress, SweepOutcome {
  readonly webhookId: string;
}

/** Assets per chunk: the coalescing lock is held for one chunk, a fraction of a second. */
const CHUNK = 500;

/** The digest of what decides a mirror webhook's set: a reconcile against other checks starts over. */
export function checksDigest(webhook: Pick<WebhookConfig, 'resourceTypes' | 'eventTypes' | 'filters'>): string {
  return createHash('sha256')
    .update(JSON.stringify([webhook.resourceTypes, webhook.eventTypes, webhook.filters]))
    .digest('hex');
}

export async function reconcile(options: ReconcileOptions): Promise<ReconcileResult> {
  const job = new ReconcileJob(options);
  const outcome = await runSweep(options, job);
  return { ...job.progress(), webhookId: options.webhook.id, ...outcome };
}

/** What a reconcile selects (the assets, then the members gone) and sends (EDITED and UNMATCHED), for runSweep. */
class ReconcileJob implements SweepJob<ReconcileProgress> {
  readonly kind = 'reconcile';
  readonly webhookId: string;
  private totals: ReconcileTotals = NO_PROGRESS;
  private dryRun = true;
  private readonly routed: RoutedWebhook;
  private readonly checks: ReconcileChecks;

  constructor(private readonly options: ReconcileOptions) {
    this.webhookId = options.webhook.id;
    this.routed = routedWebhooks([options.webhook])[0]!;
    this.checks = {
      webhookId: this.webhookId,
      compiled: compileWebhook(options.webhook),
      seen: new SeenValues([this.routed]),
    };
  }

  async begin(
    session: pg.PoolClient,
    context: { dryRun: boolean; requestedBy: string },
  ): Promise<{ resumed: boolean }> {
    this.dryRun = context.dryRun;
    const digest = checksDigest(this.options.webhook);
    const started = await startOrResumeReconcile(session, this.webhookId, digest, context.requestedBy, this.dryRun);
    this.totals = started.totals;
    return { resumed: started.resumed };
  }

  async step(session: pg.PoolClient): Promise<SweepStep> {
    if (this.dryRun) return this.chunk(session);
    return withCoalesceLock(session, () => inTransaction(session, (client) => this.chunk(client)));
  }

  progress(): ReconcileProgress {
    return { ...this.totals };
  }

  /** One chunk of the phase under way: decides and (unless a dry run) writes. */
  private async chunk(client: pg.PoolClient): Promise<SweepStep> {
    const { phase, lastAssetId } = this.totals;
    const decided =
      phase === 'assets'
        ? await decideAssets(client, this.checks, lastAssetId, CHUNK)
        : await decideGone(client, this.webhookId, lastAssetId, CHUNK);
    const packer = new Packer(this.webhookId, {
      batchSize: this.options.webhook.batchSize,
      maxPayloadBytes: this.options.maxPayloadBytes,
    });
    const byEvent = decided.events.map((event) => packer.add(event.eventId, event.json));
    packer.finish();
    const batches = packer.drain();
    const completed = decided.phaseOver && phase === 'gone';
    const after = this.after(decided, batches.length);
    if (!this.dryRun) {
      await assignPayloadIds(client, batches);
      await writePayloads(client, null, batches, isoTimestamp(new Date()));
      const events = decided.events.map((event, i) => ({ ...event, batch: byEvent[i]! }));
      await insertSweptEvents(client, { kind: 'reconcile', id: after.reconcileId! }, this.routed, events);
      await writeMemberChanges(client, decided.members.takeChanges());
      await recordSweepChunk(client, RECONCILE_RECORD, after.reconcileId!, {
        from: { phase, last_asset_id: lastAssetId },
        to: {
          phase: after.phase,
          last_asset_id: after.lastAssetId,
          assets_read: after.assetsRead,
          edited_sent: after.editedSent,
          unmatched_sent: after.unmatchedSent,
          payloads: after.payloads,
        },
        completed,
      });
    }
    this.totals = after;
    return { completed, advanced: true, wrote: batches.length > 0 };
  }

  /** The totals and position once the chunk is done: the next phase starts at its beginning. */
  private after(decided: DecidedChunk, payloads: number): ReconcileTotals {
    const { totals } = this;
    const phase = decided.phaseOver && totals.phase === 'assets' ? 'gone' : totals.phase;
    const edited = decided.events.filter((event) => event.eventType === 'EDITED').length;
    return {
      reconcileId: totals.reconcileId,
      phase,
      assetsRead: totals.assetsRead + decided.read,
      editedSent: totals.editedSent + edited,
      unmatchedSent: totals.unmatchedSent + decided.events.length - edited,
      payloads: totals.payloads + payloads,
      lastAssetId: phase === totals.phase ? decided.last : null,
    };
  }
}
