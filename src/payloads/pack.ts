import { bodyBytes, serializeBody } from './serialize.js';

/**
 * A payload being filled. It may span several chunks of one run: it is
 * persisted as `open` at the end of a chunk and updated by the next one, so a
 * run produces full payloads except the last one per webhook.
 */
export interface Batch {
  /** Assigned when the batch is first persisted; null before. */
  payloadId: number | null;
  /** Its payload row exists (see payloadGroups). */
  persisted: boolean;
  readonly webhookId: string;
  readonly events: string[];
  readonly eventIds: string[];
  eventBytes: number;
  /** Full: no further event fits. A sealed batch becomes a `pending` payload. */
  sealed: boolean;
  /** A single event larger than maxPayloadBytes: dead-lettered as too_large. */
  tooLarge: boolean;
  /**
   * Holds an event serialized for this webhook alone (a mirror webhook's
   * UNMATCHED or raised eventTimestamp): the same eventIds no longer mean the
   * same bytes, so its body is never shared (see payloadGroups).
   */
  tailored: boolean;
}

export interface PackLimits {
  readonly batchSize: number;
  readonly maxPayloadBytes: number;
}

/**
 * Packs one webhook's events, in order of occurrence, into batches of at most
 * batchSize events and maxPayloadBytes serialized bytes. Pure: no I/O.
 */
export class Packer {
  private current: Batch | null = null;
  /** Batches changed since the last drain, to be persisted by the caller. */
  private readonly touched = new Set<Batch>();

  constructor(
    readonly webhookId: string,
    private readonly limits: PackLimits,
  ) {}

  /** Adds one serialized event (`tailored`: for this webhook alone, see Batch); returns the batch that carries it. */
  add(eventId: string, serializedEvent: string, tailored = false): Batch {
    const size = Buffer.byteLength(serializedEvent);
    if (bodyBytes(1, size) > this.limits.maxPayloadBytes) {
      // It can never fit: a batch of its own, dead-lettered instead of blocking the webhook.
      const alone = this.newBatch();
      alone.events.push(serializedEvent);
      alone.eventIds.push(eventId);
      alone.eventBytes = size;
      alone.sealed = true;
      alone.tooLarge = true;
      alone.tailored = tailored;
      return alone;
    }
    let batch = this.current;
    if (
      batch &&
      (batch.events.length >= this.limits.batchSize ||
        bodyBytes(batch.events.length + 1, batch.eventBytes + size) > this.limits.maxPayloadBytes)
    ) {
      this.seal(batch);
      batch = null;
    }
    if (!batch) {
      batch = this.newBatch();
      this.current = batch;
    }
    batch.events.push(serializedEvent);
    batch.eventIds.push(eventId);
    batch.eventBytes += size;
    if (tailored) batch.tailored = true;
    this.touched.add(batch);
    if (batch.events.length >= this.limits.batchSize) {
      this.seal(batch);
    }
    return batch;
  }

  /** Seals the batch still open: called at the end of a run. */
  finish(): void {
    if (this.current) this.seal(this.current);
  }

  /** The batches changed since the last call, to persist in this chunk's transaction. */
  drain(): Batch[] {
    const touched = [...this.touched];
    this.touched.clear();
    return touched;
  }

  private newBatch(): Batch {
    const batch: Batch = {
      payloadId: null,
      persisted: false,
      webhookId: this.webhookId,
      events: [],
      eventIds: [],
      eventBytes: 0,
      sealed: false,
      tooLarge: false,
      tailored: false,
    };
    this.touched.add(batch);
    return batch;
  }

  private seal(batch: Batch): void {
    batch.sealed = true;
    this.touched.add(batch);
    if (this.current === batch) this.current = null;
  }
}

/** The body of a batch, generated now. */
export function batchBody(batch: Batch, webhookTimestamp: string): string {
  return serializeBody(batch.events, webhookTimestamp);
}
