import { Packer, type Batch } from '../payloads/pack.js';
import type { SweptEvent } from '../sweep/events.js';

/** An event gathered for the next write. */
export interface PendingEvent extends Omit<SweptEvent, 'batch'> {
  readonly json: string;
  /** The asset read just before this one (null: none since the backfill began). */
  readonly previousAssetId: string | null;
  /** Assets read and excluded since the last write, before this one. */
  readonly readBefore: number;
  readonly excludedBefore: number;
}

/** How a write's events are cut: what it commits, and the position it leaves. */
export interface WritePlan {
  readonly batches: Batch[];
  readonly events: SweptEvent[];
  readonly carried: PendingEvent[];
  readonly position: { readonly lastAssetId: string | null; readonly read: number; readonly excluded: number };
}

/**
 * Packs the gathered events: the payloads that are full (all, when
 * `completed`) are written, with their events and the position up to the
 * last asset they cover. The events of the payload still open are carried to
 * the next write, not committed: their assets lie after the committed
 * position, so a crash reads them again. Every payload but a backfill's last
 * is therefore full.
 */
export function planWrite(input: {
  readonly webhookId: string;
  readonly limits: { readonly batchSize: number; readonly maxPayloadBytes: number };
  readonly pending: readonly PendingEvent[];
  /** The last asset read, and the assets read and excluded since the last write. */
  readonly readCursor: string | null;
  readonly pendingRead: number;
  readonly pendingExcluded: number;
  readonly completed: boolean;
}): WritePlan {
  const { pending, completed } = input;
  const packer = new Packer(input.webhookId, input.limits);
  const carriers = pending.map((event) => packer.add(event.eventId, event.json));
  if (completed) packer.finish();
  const open = completed ? undefined : packer.drain().find((batch) => !batch.sealed);
  const cut = open === undefined ? pending.length : carriers.indexOf(open);
  const carried = pending.slice(cut);
  return {
    batches: [...new Set(carriers.slice(0, cut))],
    events: pending.slice(0, cut).map((event, index) => ({ ...event, batch: carriers[index]! })),
    carried,
    position:
      carried.length === 0
        ? { lastAssetId: input.readCursor, read: input.pendingRead, excluded: input.pendingExcluded }
        : {
            lastAssetId: carried[0]!.previousAssetId,
            read: carried[0]!.readBefore,
            excluded: carried[0]!.excludedBefore,
          },
  };
}
