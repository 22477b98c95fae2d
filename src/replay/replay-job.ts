import type pg from 'pg';
import { UserError } from '../errors.js';
import { assertMoveTarget } from '../investigate/webhook-state.js';
import { replayPayloads } from '../lifecycle/transitions.js';
import { recordSweepChunk } from '../sweep/record.js';
import type { SweepJob, SweepStart, SweepStep } from '../sweep/sweep.js';
import { inTransaction } from '../db/transaction.js';
import type { ReplayOptions, ReplayProgress } from './replay-options.js';
import { countSelection, nextBatch, windowBounds } from './selection.js';
import { findRunningReplay, REPLAY_RECORD, startOrResumeReplay } from './store.js';

const BATCH_SIZE = 500;

/** The refusal of UNMATCHED to a webhook that is not a mirror one, worded for the command line. */
function unmatchedRefusal(target: string, moved: boolean, payloadId: number): UserError {
  return new UserError(
    'unmatched_to_plain_webhook',
    `${moved ? '--to-webhook' : '--webhook'}: expected a mirror webhook, got ${target}, which is not one (mirror: false): ` +
      `payload ${payloadId} of the window carries UNMATCHED events, which only a mirror webhook receives; ` +
      'narrow the window or the --event-type list to leave it out, or replay to a mirror webhook',
  );
}

/** What a replay selects (delivered payloads, in batches) and sends (a new series of each), for runSweep. */
export class ReplayJob implements SweepJob<ReplayProgress> {
  readonly kind = 'replay';
  readonly webhookId: string;
  /** The webhook the payloads move to; null: their own. */
  readonly target: string | null;
  private dryRun = true;
  private replayId: number | null = null;
  private requestedBy = '';
  /** The resume record's keyset position: every selected payload up to it is done; null before the first batch. */
  private position: number | null = null;
  /** The walk reads payloads after this id, up to `last`. */
  private after = 0;
  private last = 0;
  private totals = { payloads: 0, events: 0 };
  private readonly batchSize: number;

  constructor(private readonly options: ReplayOptions) {
    this.webhookId = options.selection.webhookId;
    this.target = options.moveTo === undefined || options.moveTo === this.webhookId ? null : options.moveTo;
    this.batchSize = options.batchSize ?? BATCH_SIZE;
  }

  async begin(
    session: pg.PoolClient,
    { dryRun, requestedBy }: { readonly dryRun: boolean; readonly requestedBy: string },
  ): Promise<SweepStart> {
    this.dryRun = dryRun;
    this.requestedBy = requestedBy;
    const { selection } = this.options;
    // The webhook that receives them must be one the service sends to (paused
    // and suspended count: they wait), the selection's own as a moved one.
    await assertMoveTarget(session, this.target === null ? '--webhook' : '--to-webhook', this.target ?? this.webhookId);
    const running = await findRunningReplay(session, selection, this.target);
    const bounds = await windowBounds(session, selection);
    // Resumed, the walk ends where it was to end when the replay started.
    const last = running === null ? (bounds?.last ?? null) : running.maxPayloadId;
    this.position = running?.lastPayloadId ?? null;
    this.after = Math.max(this.position ?? 0, (bounds?.first ?? 1) - 1);
    this.last = last ?? 0;
    const sentTo = this.target ?? this.webhookId;
    const {
      rows: [mirror],
    } = await session.query<{ is: boolean }>('select asset_webhooks.is_mirror_webhook($1) as is', [sentTo]);
    const count = await countSelection(session, selection, { after: this.after, last: this.last }, !mirror!.is);
    if (count.firstUnmatched !== null) throw unmatchedRefusal(sentTo, this.target !== null, count.firstUnmatched);
    if (dryRun) {
      this.replayId = running?.replayId ?? null;
      this.totals = {
        payloads: (running?.payloads ?? 0) + count.payloads,
        events: (running?.events ?? 0) + count.events,
      };
      this.position = count.lastPayloadId ?? this.position;
      return { resumed: running !== null };
    }
    const { replay, resumed } = await startOrResumeReplay(session, selection, this.target, last, requestedBy);
    this.replayId = replay.replayId;
    this.totals = { payloads: replay.payloads, events: replay.events };
    return { resumed };
  }

  async step(session: pg.PoolClient): Promise<SweepStep> {
    // A dry run counted everything in begin.
    if (this.dryRun) return { completed: true, advanced: true, wrote: false };
    const replayId = this.replayId!;
    const done = await inTransaction(session, async (client) => {
      const range = { after: this.after, last: this.last };
      const batch = await nextBatch(client, this.options.selection, range, this.batchSize);
      const answers =
        batch.length === 0
          ? []
          : await replayPayloads(
              client,
              batch.map((row) => row.payloadId),
              { replayId, requestedBy: this.requestedBy, toWebhookId: this.target },
            );
      const refused = answers.find((answer) => answer.reason === 'unmatched_to_plain_webhook');
      if (refused) throw unmatchedRefusal(this.target ?? this.webhookId, this.target !== null, refused.payloadId);
      const applied = batch.filter((_, index) => answers[index]!.applied);
      const totals = {
        payloads: this.totals.payloads + applied.length,
        events: this.totals.events + applied.reduce((sum, row) => sum + row.eventCount, 0),
      };
      const position = batch.at(-1)?.payloadId ?? this.position;
      const completed = batch.length < this.batchSize;
      await recordSweepChunk(client, REPLAY_RECORD, replayId, {
        from: { last_payload_id: this.position },
        to: { last_payload_id: position, ...totals },
        completed,
      });
      return { position, totals, completed, wrote: applied.length > 0 };
    });
    this.position = done.position;
    this.after = Math.max(this.after, done.position ?? 0);
    this.totals = done.totals;
    return { completed: done.completed, advanced: true, wrote: done.wrote };
  }

  progress(): ReplayProgress {
    return {
      replayId: this.replayId,
      ...this.totals,
      lastPayloadId: this.position,
    };
  }
}
