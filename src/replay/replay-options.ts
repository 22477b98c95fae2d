import type { SweepOptions, SweepOutcome } from '../sweep/sweep.js';
import type { WebhookState } from '../investigate/webhook-state.js';
import type { ReplaySelection } from './selection.js';

/**
 * A replay: the delivered payloads of a selection (ReplaySelection) sent
 * again, in payload order, each in a new series of its own payload, as
 * `dead-letters redeliver` sends a dead letter again: same body, same
 * eventIds, same webhook-id (src/delivery/http/signing.ts derives it from
 * the payload). A receiver that kept its deduplication memory ignores them;
 * one that lost its data gets them back.
 *
 * A resumable sweep (src/sweep/sweep.ts): the payloads are read in batches
 * by keyset over payload ids, each batch's new series and the replay's new
 * position committed in one transaction, so memory holds one batch whatever
 * the size of the window, and an interrupted replay resumes, given the same
 * arguments, after the last committed batch without sending a payload twice.
 *
 * Before the first batch, one statement counts the selection and looks for
 * a payload that carries UNMATCHED when the target is not a mirror webhook:
 * such a replay is refused before anything changes, as a moved redelivery
 * is. The replayed payloads wait in their webhook's queue, sent in payload
 * order: ahead of the newer payloads still waiting, since the queue is
 * ordered by payload id.
 */
export interface ReplayOptions extends SweepOptions<ReplayProgress> {
  readonly selection: ReplaySelection;
  /** `--to-webhook`: the webhook the payloads move to; undefined (or the selection's own): they stay. */
  readonly moveTo?: string | undefined;
  /** Payloads per batch, each batch a transaction. Default 500. */
  readonly batchSize?: number;
}

export interface ReplayProgress {
  /** Null in a dry run of a replay not started yet. */
  readonly replayId: number | null;
  /** Payloads started again (a dry run: that would be), earlier interrupted runs of the replay included. */
  readonly payloads: number;
  /** The events those payloads carry. */
  readonly events: number;
  /** Every selected payload up to this id is done; null before the first batch. */
  readonly lastPayloadId: number | null;
}

export interface ReplayResult extends ReplayProgress, SweepOutcome {
  /** The webhook whose payloads were selected. */
  readonly webhookId: string;
  /** The webhook they were moved to (`--to-webhook`); null when they stay. */
  readonly movedTo: string | null;
  /** Of the webhook they are sent to. */
  readonly webhookState: WebhookState;
}
