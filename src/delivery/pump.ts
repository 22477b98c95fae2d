import pg from 'pg';
import { describeError, KEEPALIVE } from '../db/connect.js';
import { PAYLOADS_READY_CHANNEL } from '../db/payloads-ready.js';
import {
  claimPayloads,
  type AttemptOf,
  type ClaimedPayload,
  type ClaimRequest,
  type SettleRequest,
} from './attempt-store.js';
import { deliverClaimed, releaseClaimed, type DeliveryContext } from './deliver.js';
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
  /**
   * Standby payloads claimed per webhook of concurrency 2 or more beyond its
   * concurrency, while this process has requests open to it. Default 2; 0
   * turns standby off.
   */
  readonly standbyPerWebhook?: number;
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
 * Standby: while the pump has requests open to a webhook, claims also take
 * a few of its payloads beyond its concurrency (see claim_payloads), which
 * wait here unsent. When a request to that webhook ends with a healthy answer
 * and its result is not yet handed to a statement, a standby is sent in its
 * place at once: the receiver's concurrency is kept, because the ended
 * request still counts in the database until its result is written, and a
 * slot is taken again without waiting for the database. A standby is sent
 * within STANDBY_MAX_WAIT_MS of its claim or not at all. A standby that can no
 * longer be sent that way (its webhook's receiver failed, no request of the
 * pump is open to it, the pump stops) is given back to its queue. Standbys
 * hold slots of maxRequestsInFlight like requests, which bounds the bodies
 * kept in memory. A standby's attempt counts once it is sent: the next
 * statement that writes results says so (at the latest the one that writes
 * the result of the request it replaced); until then crash recovery gives it
 * back uncounted (asset_webhooks.attempts.sent).
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
  /** Per webhook, the pump's requests sent and not yet ended. */
  private open = new Map<string, number>();
  /** Per webhook, standby payloads claimed and not sent, oldest first, with when they were claimed. */
  private standbys = new Map<string, Array<{ payload: ClaimedPayload; claimedAt: number }>>();
  /** Per webhook, how long its latest request took until it ended, ms. */
  private lastRequestMs = new Map<string, number>();
  private standbyCount = 0;
  private standbysSent = 0;
  private standbysGivenBack = 0;
  /** Standbys sent whose sending no statement has recorded yet (see reserve). */
  private sentUnrecorded: AttemptOf[] = [];
  /**
   * Requests that ended with a healthy answer, no standby of their webhook at
   * hand, and their results not yet handed to a statement: each may still be
   * replaced by a standby that a claim brings (attemptKey → webhook).
   */
  private replaceable = new Map<string, string>();
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
    this.context.settler.claimWith?.(this);
    this.poll = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.sweep = setInterval(() => {
      this.sweeping ??= this.runSweep().finally(() => {
        this.sweeping = undefined;
      });
    }, this.options.sweepMs ?? 5000);
    this.listener = listen(this.options.databaseUrl, () => this.wake(), this.context);
    this.wake();
  }

  /** Requests in flight now (standbys are not). */
  get requestsInFlight(): number {
    return this.slots.size - this.standbyCount;
  }

  /** Standby payloads held now, and since the start sent in place of ended requests or given back. */
  get standby(): { readonly held: number; readonly sent: number; readonly givenBack: number } {
    return { held: this.standbyCount, sent: this.standbysSent, givenBack: this.standbysGivenBack };
  }

  /** Sends a standby in place of a request that has ended. */
  private sendStandby(payload: ClaimedPayload): void {
    this.standbysSent += 1;
    this.sentUnrecorded.push({ payloadId: payload.payloadId, series: payload.series, attemptNo: payload.attemptNo });
    this.send(payload);
  }

  /** Room under maxRequestsInFlight not held or set aside. */
  private room(): number {
    return this.context.settings().maxRequestsInFlight - this.slots.size - this.reserved;
  }

  private claimRequest(max: number): ClaimRequest {
    const perWebhook = this.options.standbyPerWebhook ?? 2;
    const webhooks: string[] = [];
    if (perWebhook > 0)
      for (const [webhookId, count] of this.open)
        if (count > 0 && (this.lastRequestMs.get(webhookId) ?? 0) < STANDBY_MAX_WAIT_MS / 2) webhooks.push(webhookId);
    return {
      now: this.context.now(),
      max,
      share: Math.max(1, Math.ceil(max / 4)),
      after: this.cursor,
      expireAfterSeconds: this.context.settings().deadLetterAfterSeconds,
      standby: webhooks.length > 0 ? { perWebhook, webhooks } : undefined,
    };
  }

  /**
   * SlotClaimer: a batch that ends attempts of this pump claims into the
   * slots it frees, and records the standbys sent since the last batch.
   */
  reserve(requests: readonly SettleRequest[]): ClaimRequest | null {
    const freed: string[] = [];
    for (const request of requests) {
      if (request.attemptNo === null) continue;
      const key = attemptKey(request.payload.payloadId, request.payload.series, request.attemptNo);
      // Once its result may be written, an ended request no longer counts in the database: nothing may replace it.
      const webhookId = this.replaceable.get(key);
      if (webhookId !== undefined) {
        this.replaceable.delete(key);
        this.releaseIfStranded(webhookId);
      }
      if (this.slots.delete(key)) freed.push(key);
    }
    const sentStandbys = this.sentUnrecorded.splice(0);
    const room = freed.length === 0 || this.stopped ? 0 : Math.max(this.room(), 0);
    if (room === 0 && sentStandbys.length === 0) return null;
    if (room > 0) for (const key of freed) this.refilled.add(key);
    this.reserved += room;
    return { ...this.claimRequest(room), sentStandbys };
  }

  /** SlotClaimer: the batch's claim is in; its attempts have started. */
  claimed(claim: ClaimRequest, payloads: readonly ClaimedPayload[]): void {
    this.reserved -= claim.max;
    this.accept(payloads, claim.now);
    this.claimIfPutOff();
  }

  /** SlotClaimer: the batch's statement failed; a claim of the pump's own tries instead, and the next batch records its sent standbys. */
  release(claim: ClaimRequest): void {
    this.sentUnrecorded.unshift(...(claim.sentStandbys ?? []));
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

  /** Stops claiming, gives back standbys, and waits for the attempts in flight to be made and written. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    clearInterval(this.sweep);
    for (const webhookId of [...this.standbys.keys()]) this.releaseStandbys(webhookId);
    await this.listener?.close();
    await this.sweeping;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.context.settler.claimWith?.(undefined);
  }

  /** Takes claimed payloads: sends each, or keeps it as a standby (sent at once if a request it may replace has ended). */
  private accept(payloads: readonly ClaimedPayload[], claimedAt: Date): void {
    const standbyFor = new Set<string>();
    for (const payload of payloads) {
      if (!payload.standby) {
        this.send(payload);
        continue;
      }
      this.slots.add(attemptKey(payload.payloadId, payload.series, payload.attemptNo));
      const entry = { payload, claimedAt: claimedAt.getTime() };
      const waiting = this.standbys.get(payload.webhookId);
      if (waiting) waiting.push(entry);
      else this.standbys.set(payload.webhookId, [entry]);
      this.standbyCount += 1;
      standbyFor.add(payload.webhookId);
    }
    for (const webhookId of standbyFor) {
      for (const [key, ended] of this.replaceable) {
        if (ended !== webhookId) continue;
        const next = this.takeStandby(webhookId);
        if (!next) break;
        this.replaceable.delete(key);
        this.sendStandby(next);
      }
      this.releaseIfStranded(webhookId);
    }
    if (payloads.length > 0) this.cursor = payloads[payloads.length - 1]!.webhookId;
  }

  /** A request has ended (its result not yet written): send a standby in its place, or keep it replaceable. */
  private answered(payload: ClaimedPayload, key: string, receiverHealthy: boolean, requestMs: number): void {
    const webhookId = payload.webhookId;
    this.lastRequestMs.set(webhookId, requestMs);
    const open = (this.open.get(webhookId) ?? 1) - 1;
    if (open > 0) this.open.set(webhookId, open);
    else this.open.delete(webhookId);
    if (!receiverHealthy || this.stopped) {
      // A failing or throttling receiver gets its retries' pace and one attempt at a time, not the standbys.
      this.releaseStandbys(webhookId);
      return;
    }
    const next = this.takeStandby(webhookId);
    if (next) this.sendStandby(next);
    else this.replaceable.set(key, webhookId);
  }

  /**
   * The webhook's oldest standby that may still be sent; older ones are given
   * back. A standby is sent at most STANDBY_MAX_WAIT_MS after its claim.
   */
  private takeStandby(webhookId: string): ClaimedPayload | undefined {
    const now = this.context.now().getTime();
    for (let next = this.nextStandby(webhookId); next; next = this.nextStandby(webhookId)) {
      if (now - next.claimedAt <= STANDBY_MAX_WAIT_MS) return next.payload;
      this.giveBack(next.payload);
    }
    return undefined;
  }

  private nextStandby(webhookId: string): { payload: ClaimedPayload; claimedAt: number } | undefined {
    const waiting = this.standbys.get(webhookId);
    const next = waiting?.shift();
    if (!next) return undefined;
    if (waiting!.length === 0) this.standbys.delete(webhookId);
    this.standbyCount -= 1;
    return next;
  }

  /** Gives back a webhook's standbys once nothing of this pump could be replaced by them any more. */
  private releaseIfStranded(webhookId: string): void {
    if (!this.standbys.has(webhookId) || (this.open.get(webhookId) ?? 0) > 0) return;
    for (const ended of this.replaceable.values()) if (ended === webhookId) return;
    this.releaseStandbys(webhookId);
  }

  private releaseStandbys(webhookId: string): void {
    for (let next = this.nextStandby(webhookId); next; next = this.nextStandby(webhookId)) this.giveBack(next.payload);
  }

  /** Gives a standby back to its queue; its slot is held until that is written. */
  private giveBack(payload: ClaimedPayload): void {
    this.standbysGivenBack += 1;
    const key = attemptKey(payload.payloadId, payload.series, payload.attemptNo);
    const released: Promise<void> = releaseClaimed(payload, this.context)
      .catch((error: unknown) => {
        // Stopping and the database still away: recovery closes the attempt once this process is gone.
        this.context.logger.error(
          { payloadId: payload.payloadId, webhookId: payload.webhookId, err: describeError(error) },
          'could not give back a standby payload',
        );
      })
      .finally(() => {
        this.inFlight.delete(released);
        this.slots.delete(key);
        // Its slot is free in the database now.
        this.wake();
      });
    this.inFlight.add(released);
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
      const request = this.claimRequest(free);
      try {
        claimed = await claimPayloads(this.context.pool, request);
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
      this.accept(claimed, request.now);
      // A webhook may have had more than its share: ask again while there is room.
      if (claimed.length > 0) this.again = true;
    } while (this.again && !this.stopped);
  }

  private send(payload: ClaimedPayload): void {
    const key = attemptKey(payload.payloadId, payload.series, payload.attemptNo);
    this.slots.add(key);
    this.open.set(payload.webhookId, (this.open.get(payload.webhookId) ?? 0) + 1);
    let ended = false;
    const sentAt = performance.now();
    const attempt: Promise<void> = deliverClaimed(payload, this.context, (receiverHealthy) => {
      ended = true;
      this.answered(payload, key, receiverHealthy, performance.now() - sentAt);
    })
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
        // Not made (its webhook disabled meanwhile), or failed before an answer.
        if (!ended) this.answered(payload, key, false, performance.now() - sentAt);
        if (this.replaceable.delete(key)) this.releaseIfStranded(payload.webhookId);
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

/**
 * The longest a standby waits to be sent after its claim; older ones are
 * given back. Crash recovery takes an attempt of a process that lost its
 * lease for interrupted requestTimeoutSeconds + 5 s after it started (see
 * processGoneGrace): a request sent this long after its claim still ends, by
 * its timeout, before that. Standbys are claimed only for webhooks whose
 * latest request took under half of it, so that slow receivers do not claim
 * standbys only to give them back.
 */
const STANDBY_MAX_WAIT_MS = 2000;

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
