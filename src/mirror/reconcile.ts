import { createHash, randomUUID } from 'node:crypto';
import os from 'node:os';
import type pg from 'pg';
import { readAssets } from '../backfill/reads.js';
import { Packer } from '../payloads/pack.js';
import { withCoalesceLock } from '../coalesce/coalesce-lock.js';
import { routedWebhooks } from '../coalesce/routed-webhooks.js';
import { SeenValues } from '../coalesce/seen.js';
import { NOTHING_SEEN } from '../payloads/seen-row.js';
import type { WebhookConfig } from '../config/schema.js';
import { assetStateFromRow } from '../db/asset-state.js';
import { announcePayloadsReady } from '../db/payloads-ready.js';
import { inTransaction } from '../db/transaction.js';
import { compileWebhook } from '../filters/compile.js';
import { assignPayloadIds } from '../payloads/ids.js';
import { isoTimestamp, serializeEvent } from '../payloads/serialize.js';
import { writePayloads } from '../payloads/store.js';
import { insertReconcileEvents, type ReconcileEvent } from './events.js';
import { MirrorMembers, writeMemberChanges } from './members.js';
import { leavingCheck } from './route.js';
import {
  lockReconcile,
  recordReconcileChunk,
  startOrResumeReconcile,
  unlockReconcile,
  type ReconcileTotals,
} from './reconcile-store.js';

/**
 * A reconcile makes a mirror webhook's set (asset_webhooks.mirror_members)
 * what its checks give now, and tells the receiver the difference:
 *  - an EDITED with a new eventId for each asset that passes the checks (as
 *    an EDITED of it would), is not in the Trash and is not in the set;
 *  - an UNMATCHED for each asset of the set that no longer passes them, and,
 *    in a second phase, for each asset of the set that no longer exists
 *    (its PURGED never reached the webhook: sent while it was disabled).
 *
 * Each chunk reads its assets, decides, and writes its payloads, events,
 * membership and position in one transaction that holds the coalescing lock
 * (src/coalesce/run.ts): no coalescing run routes meanwhile, so membership
 * has one writer, the chunk's payloads come after every payload routed
 * before it and before every one routed after it, and a change committed
 * after its read is routed after it, from the set the chunk left. The set
 * itself keeps an interrupted reconcile from sending an asset twice; the
 * position only saves reading again what is done.
 */
export interface ReconcileOptions {
  readonly pool: pg.Pool;
  readonly webhook: WebhookConfig;
  readonly maxPayloadBytes: number;
  /** Count what would be sent, change nothing. */
  readonly dryRun?: boolean;
  readonly requestedBy?: string;
  /** Called after each chunk, for progress lines. */
  readonly onProgress?: (progress: ReconcileProgress) => void;
  /** Once aborted, the reconcile stops after the chunk in progress commits. */
  readonly signal?: AbortSignal;
  /**
   * When another reconcile of the webhook is under way: wait for it to end
   * (true, the service's), or refuse at once (false, the default: the command).
   */
  readonly waitForOther?: boolean;
}

/** Totals of the reconcile, earlier interrupted runs included, and its position. */
export type ReconcileProgress = ReconcileTotals;

export interface ReconcileResult extends ReconcileProgress {
  readonly webhookId: string;
  readonly status: 'running' | 'completed';
  readonly resumed: boolean;
  readonly dryRun: boolean;
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
  const { pool, webhook } = options;
  const dryRun = options.dryRun === true;
  const [routed] = routedWebhooks([webhook]);
  const compiled = compileWebhook(webhook);
  const seen = new SeenValues([routed!]);
  const digest = checksDigest(webhook);
  const session = await pool.connect();
  let locked = false;
  try {
    await lockReconcile(session, webhook.id, options.waitForOther === true);
    locked = true;
    const started = await startOrResumeReconcile(
      session,
      webhook.id,
      digest,
      options.requestedBy ?? `${os.userInfo().username}@${os.hostname()}`,
      dryRun,
    );
    const resumed = started.resumed;
    let totals = started.totals;
    let status: 'running' | 'completed' = 'running';
    const limits = { batchSize: webhook.batchSize, maxPayloadBytes: options.maxPayloadBytes };

    /** One chunk: decides and (unless a dry run) writes; returns whether the phase is over. */
    const chunk = async (client: pg.PoolClient): Promise<boolean> => {
      // Read afresh for each chunk: the chunk before committed, and another
      // reconcile of the webhook may have written since.
      const members = new MirrorMembers();
      const events: ReconcileEvent[] = [];
      const send = (
        event: Omit<ReconcileEvent, 'json' | 'payloadId' | 'eventId' | 'occurredAt'>,
        readMs: number,
      ): void => {
        const at = members.nextMs(event.assetId, readMs);
        const occurredAt = new Date(at).toISOString();
        const eventId = randomUUID();
        const json = serializeEvent({
          ...event,
          eventId,
          eventTimestamp: occurredAt,
          assetUuid: event.assetUuid ?? '',
        });
        events.push({ ...event, eventId, occurredAt, json, payloadId: null });
        members.record(event.assetId, event.assetUuid, webhook.id, event.eventType === 'EDITED', at);
      };
      let read = 0;
      let phaseOver: boolean;
      let last: string | null;
      if (totals.phase === 'assets') {
        const rows = await readAssets(client, totals.lastAssetId, null, CHUNK);
        await members.load(
          client,
          rows.map((state) => state.asset_key),
        );
        for (const state of rows) {
          const asset = assetStateFromRow(state);
          const passes = leavingCheck(compiled, asset) === null;
          const member = members.isMember(webhook.id, state.asset_key);
          const readMs = Date.parse(state.read_at);
          const common = {
            assetId: state.asset_key,
            assetUuid: asset.assetUuid,
            atomId: asset.latestAtomId,
            seen: seen.of(asset),
          };
          if (passes && !member && state.in_trash !== true) send({ ...common, eventType: 'EDITED' }, readMs);
          else if (!passes && member) send({ ...common, eventType: 'UNMATCHED' }, readMs);
        }
        read = rows.length;
        phaseOver = rows.length < CHUNK;
        last = rows.at(-1)?.asset_key ?? totals.lastAssetId;
      } else {
        const { rows } = await client.query<{ asset_id: string; asset_uuid: string | null; now: string }>(
          `select m.asset_id::text as asset_id, m.asset_uuid,
                  to_char(statement_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as now
           from asset_webhooks.mirror_members m
           where $1 = any(m.webhooks) and m.asset_id > coalesce($2::bigint, -9223372036854775808)
             and not exists (select 1 from asset_webhooks.asset_state s where s.asset_id = m.asset_id)
           order by m.asset_id
           limit $3`,
          [webhook.id, totals.lastAssetId, CHUNK],
        );
        // Its other mirror webhooks' membership is kept: the row is rewritten whole.
        await members.load(
          client,
          rows.map((gone) => gone.asset_id),
        );
        for (const gone of rows) {
          send(
            {
              eventType: 'UNMATCHED',
              assetId: gone.asset_id,
              assetUuid: gone.asset_uuid,
              atomId: null,
              seen: { ...NOTHING_SEEN, asset_gone: true },
            },
            Date.parse(gone.now),
          );
        }
        phaseOver = rows.length < CHUNK;
        last = rows.at(-1)?.asset_id ?? totals.lastAssetId;
      }
      const packer = new Packer(webhook.id, limits);
      const byEvent = events.map((event) => packer.add(event.eventId, event.json));
      packer.finish();
      const batches = packer.drain();
      const changes = members.takeChanges();
      const nextPhase = phaseOver && totals.phase === 'assets' ? 'gone' : totals.phase;
      const completed = phaseOver && totals.phase === 'gone';
      const edited = events.filter((event) => event.eventType === 'EDITED').length;
      const added = { assetsRead: read, edited, unmatched: events.length - edited, payloads: batches.length };
      const after: ReconcileTotals = {
        reconcileId: totals.reconcileId,
        phase: nextPhase,
        assetsRead: totals.assetsRead + read,
        editedSent: totals.editedSent + edited,
        unmatchedSent: totals.unmatchedSent + added.unmatched,
        payloads: totals.payloads + batches.length,
        lastAssetId: nextPhase === totals.phase ? last : null,
      };
      if (!dryRun) {
        await assignPayloadIds(client, batches);
        events.forEach((event, i) => (event.payloadId = byEvent[i]!.payloadId));
        await writePayloads(client, null, batches, isoTimestamp(new Date()));
        await insertReconcileEvents(client, totals.reconcileId!, routed!, events);
        await writeMemberChanges(client, changes);
        await recordReconcileChunk(client, after, added, completed);
      }
      totals = after;
      if (completed) status = 'completed';
      return batches.length > 0;
    };

    while (status === 'running') {
      const sent = dryRun ? await chunk(session) : await withCoalesceLock(session, () => inTransaction(session, chunk));
      // The pumps are woken once committed; if this fails, their next poll finds the payloads.
      if (sent && !dryRun) await announcePayloadsReady(pool).catch(() => {});
      options.onProgress?.({ ...totals });
      if (options.signal?.aborted) break;
    }
    return { ...totals, webhookId: webhook.id, status, resumed, dryRun };
  } finally {
    if (locked) await unlockReconcile(session, webhook.id).catch(() => {});
    session.release();
  }
}
