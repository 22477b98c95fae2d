import pg from 'pg';
import { describeError, KEEPALIVE } from '../db/connect.js';
import { PAYLOADS_READY_CHANNEL } from '../db/payloads-ready.js';
import { claimPayloads, type ClaimedPayload, type ClaimRequest, type SettleRequest } from './attempt-store.js';
import { deliverClaimed, type DeliveryContext } from './deliver.js';
import { expireWaiting, recoverOrphans } from './recover.js';
import type { SlotClaimer } from './settle-batcher.js';

export interface PumpOptions {
  /** The database URL, for the connection that listens for new payloads. */
  readonly databaseUrl: string;
  /** How long this process has held its lease without a break (crash recovery waits for it: see processGoneGrace). */
  ownLeaseHeldForMs(): number;
  /** How often the database is asked for due payloads when nothing woke the pump. Default 1,000 ms. */
  readonly pollMs?: number;
  /** How often attempts of dead processes are closed and expired payloads dead-lettered. Default 5,000 ms. */
  readonly sweepMs?: number;
}

/**
 * The delivery pump of one `run` process. A request in flight costs a socket
 * and a promise, not a worker: the pump claims due payloads from the database
 * (asset_webhooks.claim_payloads: per webhook within its concurrency, one at
 * a time while its receiver is failing, none while it is throttled; webhooks
 * take turns) up to maxRequestsInFlight, and makes each attempt
 * concurrently. The slots attempts free are claimed again in the statement
 * that writes their results (it is the settler's SlotClaimer: see
 * asset_webhooks.settle_and_claim), so a slot is taken again one round trip
 * after its request ends. The pump also claims on its own when coalescing in
 * any process commits payloads (LISTEN on PAYLOADS_READY_CHANNEL, or wake()
 * from this process), when an attempt ends without such a claim, and every
 * pollMs as the net for retries that come due and notifications lost with a
 * connection. Every sweepMs it runs crash recovery and the expiry sweep.
 *
 * The cap holds across both ways of claiming: a claim sets its room aside
 * (`reserved`) until its answer is in, and a slot is held from the claim of
 * an attempt until its result goes to be written.
 *
 * Nothing here runs in graphile-worker: coalescing and maintenance never wait
 * for delivery capacity, however many requests are in flight.
 */
export class DeliveryPump implements SlotClaimer {
  /** Every attempt of this pump until it has ended and its result is written. */
  private inFlight = new Set<Promise<void>>();
  /** The attempts (attemptKey) whose requests hold a slot of maxRequestsInFlight. */
  private slots = new Set<string>();
  /** Slots set aside for claims under way. */
  private reserved = 0;
  /** Attempts whose freed slot their settle statement claimed again: their end needs no claim of its own. */
  private refilled = new Set<string>();
  /** A claim found no room only because another claim had set it aside: claim once that one is in. */
  private claimAfterReserved = false;
  private claiming = false;
  private again = false;
  private cursor: string | null = null;
  private stopped = false;
  private claimFailures = 0;
  private sweepFailures = 0;
  private poll: NodeJS.Timeout | undefined;
  private sweep: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private listener: Listener | undefined;

  constructor(
    private readonly context: DeliveryContext,
    private readonly options: PumpOptions,
  ) {}

  /** Starts claiming, listening and sweeping. */
  start(): void {
    this.poll = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.sweep = setInterval(() => {
      this.sweeping ??= this.runSweep().finally(() => {
        this.sweeping = undefined;
      });
    }, this.options.sweepMs ?? 5000);
    this.listener = listen(this.options.databaseUrl, () => this.wake(), this.context);
    this.context.settler.claimWith?.(this);
    this.wake();
  }

  /** Requests in flight now. */
  get requestsInFlight(): number {
    return this.slots.size;
  }

  /** Room under maxRequestsInFlight not held or set aside. */
  private room(): number {
    return this.context.settings().maxRequestsInFlight - this.slots.size - this.reserved;
  }

  private claimRequest(max: number): ClaimRequest {
    return {
      now: this.context.now(),
      max,
      share: Math.max(1, Math.ceil(max / 4)),
      after: this.cursor,
      expireAfterSeconds: this.context.settings().deadLetterAfterSeconds,
    };
  }

  /** SlotClaimer: a batch that ends attempts of this pump claims into the slots it frees. */
  reserve(requests: readonly SettleRequest[]): ClaimRequest | null {
    const freed: string[] = [];
    for (const request of requests) {
      if (request.attemptNo === null) continue;
      const key = attemptKey(request.payload.payloadId, request.payload.series, request.attemptNo);
      if (this.slots.delete(key)) freed.push(key);
    }
    if (freed.length === 0 || this.stopped) return null;
    const room = this.room();
    if (room <= 0) return null;
    for (const key of freed) this.refilled.add(key);
    this.reserved += room;
    return this.claimRequest(room);
  }

  /** SlotClaimer: the batch's claim is in; its attempts have started. */
  claimed(claim: ClaimRequest, payloads: readonly ClaimedPayload[]): void {
    this.reserved -= claim.max;
    for (const payload of payloads) this.send(payload);
    if (payloads.length > 0) this.cursor = payloads[payloads.length - 1]!.webhookId;
    this.claimIfPutOff();
  }

  /** SlotClaimer: the batch's statement failed; a claim of the pump's own tries instead. */
  release(claim: ClaimRequest): void {
    this.reserved -= claim.max;
    this.claimAfterReserved = false;
    this.wake();
  }

  private claimIfPutOff(): void {
    if (!this.claimAfterReserved) return;
    this.claimAfterReserved = false;
    this.wake();
  }

  /** Claims now (or right after the claim under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = true;
    void this.claimWhileFree().finally(() => {
      this.claiming = false;
    });
  }

  /** Stops claiming and waits for the attempts in flight to be made and written. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    clearInterval(this.sweep);
    await this.listener?.close();
    await this.sweeping;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async claimWhileFree(): Promise<void> {
    do {
      this.again = false;
      const free = this.room();
      if (this.stopped) return;
      if (free <= 0) {
        // Work announced meanwhile may not be in the claim under way: look again once it is in.
        if (this.reserved > 0) this.claimAfterReserved = true;
        return;
      }
      let claimed: ClaimedPayload[];
      this.reserved += free;
      try {
        claimed = await claimPayloads(this.context.pool, this.claimRequest(free));
        if (this.claimFailures > 0)
          this.context.logger.info({ failedClaims: this.claimFailures }, 'delivery claims payloads again');
        this.claimFailures = 0;
      } catch (error) {
        // The poll tries again; one warning per failing spell.
        if (this.claimFailures === 0)
          this.context.logger.warn(
            { err: describeError(error) },
            'could not claim payloads for delivery; trying again',
          );
        this.claimFailures += 1;
        return;
      } finally {
        this.reserved -= free;
      }
      for (const payload of claimed) this.send(payload);
      if (claimed.length > 0) {
        this.cursor = claimed[claimed.length - 1]!.webhookId;
        // A webhook may have had more than its share: ask again while there is room.
        this.again = true;
      }
    } while (this.again && !this.stopped);
  }

  private send(payload: ClaimedPayload): void {
    const key = attemptKey(payload.payloadId, payload.series, payload.attemptNo);
    this.slots.add(key);
    const attempt: Promise<void> = deliverClaimed(payload, this.context)
      .then(
        () => {},
        (error: unknown) => {
          // The result could not be written: the attempt stays unfinished, and
          // crash recovery closes it once this process is gone.
          this.context.logger.error(
            { payloadId: payload.payloadId, webhookId: payload.webhookId, err: describeError(error) },
            'could not record a delivery attempt',
          );
        },
      )
      .finally(() => {
        this.inFlight.delete(attempt);
        this.slots.delete(key);
        if (!this.refilled.delete(key)) this.wake();
      });
    this.inFlight.add(attempt);
  }

  private async runSweep(): Promise<void> {
    try {
      await recoverOrphans(this.context, this.options.ownLeaseHeldForMs());
      const expired = await expireWaiting(this.context);
      if (expired > 0) this.wake();
      this.sweepFailures = 0;
    } catch (error) {
      if (this.sweepFailures === 0)
        this.context.logger.warn(
          { err: describeError(error) },
          'delivery recovery and expiry sweep failed; trying again',
        );
      this.sweepFailures += 1;
    }
  }
}

function attemptKey(payloadId: number, series: number, attemptNo: number): string {
  return `${payloadId}/${series}/${attemptNo}`;
}

interface Listener {
  close(): Promise<void>;
}

/**
 * LISTENs on PAYLOADS_READY_CHANNEL on a connection of its own, calling
 * `onReady` for each notification; a lost connection is opened again after a
 * pause (the pump's poll covers the gap).
 */
function listen(databaseUrl: string, onReady: () => void, context: Pick<DeliveryContext, 'logger'>): Listener {
  let client: pg.Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let failures = 0;
  const reconnect = (): void => {
    if (closed) return;
    retry = setTimeout(() => void connect(), Math.min(500 * 2 ** failures, 5000));
  };
  const connect = async (): Promise<void> => {
    const next = new pg.Client({
      connectionString: databaseUrl,
      application_name: 'asset-webhooks delivery listener',
      ...KEEPALIVE,
    });
    let dropped = false;
    const drop = (): void => {
      if (dropped) return;
      dropped = true;
      if (client === next) client = undefined;
      void next.end().catch(() => {});
      reconnect();
    };
    next.on('error', drop);
    next.on('end', drop);
    next.on('notification', onReady);
    try {
      await next.connect();
      await next.query(`listen ${PAYLOADS_READY_CHANNEL}`);
    } catch (error) {
      if (failures === 0 && !closed)
        context.logger.debug({ err: describeError(error) }, 'could not listen for new payloads; polling meanwhile');
      failures += 1;
      drop();
      return;
    }
    if (closed) {
      dropped = true;
      await next.end().catch(() => {});
      return;
    }
    failures = 0;
    client = next;
    // Payloads committed while the connection was away are found by this claim.
    onReady();
  };
  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      const open = client;
      client = undefined;
      if (!open) return;
      const ended = setTimeout(
        () => (open as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy(),
        2000,
      );
      await open.end().catch(() => {});
      clearTimeout(ended);
    },
  };
}
