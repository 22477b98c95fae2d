import { describeError } from '../db/connect.js';
import { SCHEMA_CHANGED_CHANNEL } from '../db/payloads-ready.js';
import { claimPayloads, type ClaimedPayload } from './attempt-store.js';
import type { DeliveryContext } from './context.js';
import { deliverClaimed, releaseClaimed } from './deliver.js';
import { listenForPayloads, type PayloadsListener } from './payloads-listener.js';
import { expireWaiting, recoverOrphans } from './recover.js';
import { SlotLedger } from './slot-ledger.js';

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
  /** Called when a claim fails, before the poll tries again (the service checks then whether the schema moved past this release). */
  claimFailed?(): void;
  /** Called when `migrate` notifies SCHEMA_CHANGED_CHANNEL, heard on the pump's listening connection. */
  schemaChanged?(): void;
}

/**
 * The delivery pump of one `run` process. A request in flight costs a socket
 * and a promise, not a worker: the pump claims due payloads from the database
 * (asset_webhooks.claim_payloads: per webhook within its concurrency, one at
 * a time while its receiver is failing, none while it is throttled; webhooks
 * take turns) up to maxRequestsInFlight, and makes each attempt
 * concurrently; the completer writes their results and claims nothing. The
 * pump claims when an attempt ends, when coalescing in any process commits
 * payloads (a PayloadsListener, or wake() from this process), and every
 * pollMs as the net for retries that come due and notifications lost with a
 * connection. Every sweepMs it runs crash recovery and the expiry sweep.
 *
 * The pump does the I/O and nothing else: the SlotLedger decides (the cap,
 * turns, standbys: see there and Standbys), and what it asks for (send a
 * payload, give a standby back, claim) the pump does, in order, right after
 * each report to it.
 *
 * Nothing here runs in graphile-worker: coalescing and maintenance never wait
 * for delivery capacity, however many requests are in flight.
 */
export class DeliveryPump {
  /** Every attempt and standby give-back of this pump until it has ended and is written. */
  private inFlight = new Set<Promise<void>>();
  private readonly ledger: SlotLedger;
  private claiming = false;
  /** The pump's own claim under way, if any. */
  private claimRun: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private claimFailures = 0;
  private sweepFailures = 0;
  private poll: NodeJS.Timeout | undefined;
  private sweep: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private listener: PayloadsListener | undefined;

  constructor(
    private readonly context: DeliveryContext,
    private readonly options: PumpOptions,
  ) {
    this.ledger = new SlotLedger({
      // Standbys' age in this process: no decision about a payload's window.
      now: () => new Date(),
      settings: () => context.settings(),
      standbyPerWebhook: options.standbyPerWebhook,
    });
  }

  /** Starts claiming, listening and sweeping. */
  start(): void {
    this.poll = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.sweep = setInterval(() => {
      this.sweeping ??= this.runSweep().finally(() => {
        this.sweeping = undefined;
      });
    }, this.options.sweepMs ?? 5000);
    this.listener = listenForPayloads(
      {
        databaseUrl: this.options.databaseUrl,
        logger: this.context.logger,
        also: { [SCHEMA_CHANGED_CHANNEL]: () => this.options.schemaChanged?.() },
      },
      () => this.wake(),
    );
    this.wake();
  }

  /** Requests in flight now (standbys are not). */
  get requestsInFlight(): number {
    return this.ledger.requestsInFlight;
  }

  /** Standby payloads held now, and since the start sent in place of ended requests or given back. */
  get standby(): { readonly held: number; readonly sent: number; readonly givenBack: number } {
    return this.ledger.standby;
  }

  /** Claims now (or right after the claim under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = true;
    this.claimRun = this.claimWhileFree().finally(() => {
      this.claiming = false;
    });
  }

  /** Stops claiming, gives back standbys, and waits for the attempts in flight to be made and written. Once: a second call waits for the first. */
  stop(): Promise<void> {
    this.stopping ??= this.stopOnce();
    return this.stopping;
  }

  private async stopOnce(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poll);
    clearInterval(this.sweep);
    this.ledger.stop();
    this.doEffects();
    await this.listener?.close();
    await this.sweeping;
    // A claim under way has started its attempts in the database: they are
    // made and written (its standbys given back) before stop returns, like
    // the others, not left for crash recovery.
    await this.claimRun;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private doEffects(): void {
    for (const effect of this.ledger.takeEffects()) {
      if (effect.kind === 'send') this.send(effect.payload);
      else if (effect.kind === 'giveBack') this.giveBack(effect.payload);
      else this.wake();
    }
  }

  private async claimWhileFree(): Promise<void> {
    do {
      this.again = false;
      if (this.stopped) return;
      const request = this.ledger.beginClaim();
      // No room: an attempt that ends, or the claim under way, claims again.
      if (!request) return;
      let claimed: ClaimedPayload[];
      try {
        claimed = await claimPayloads(this.context.pool, request);
      } catch (error) {
        this.ledger.endClaim(request, undefined);
        this.options.claimFailed?.();
        // The poll tries again; one warning per failing spell.
        if (this.claimFailures === 0)
          this.context.logger.warn(
            { err: describeError(error) },
            'could not claim payloads for delivery; trying again',
          );
        this.claimFailures += 1;
        return;
      }
      if (this.claimFailures > 0)
        this.context.logger.info({ failedClaims: this.claimFailures }, 'delivery claims payloads again');
      this.claimFailures = 0;
      this.ledger.endClaim(request, claimed);
      this.doEffects();
      // A webhook may have had more than its share: ask again while there is room.
      if (claimed.length > 0) this.again = true;
    } while (this.again && !this.stopped);
  }

  /** Makes a claimed attempt (a standby too, once the ledger sends it in place of an ended request). */
  private send(payload: ClaimedPayload): void {
    // Its attempt counts from now on (asset_webhooks.attempts.sent): recorded before its result, and before the result it replaces.
    if (payload.standby) this.context.completer.markSent(payload);
    let ended = false;
    const sentAt = performance.now();
    const attempt: Promise<void> = deliverClaimed(payload, this.context, (receiverHealthy) => {
      ended = true;
      this.ledger.answered(payload, receiverHealthy, performance.now() - sentAt);
      this.doEffects();
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
        if (!ended) this.ledger.answered(payload, false, performance.now() - sentAt);
        this.inFlight.delete(attempt);
        this.ledger.ended(payload);
        this.doEffects();
      });
    this.inFlight.add(attempt);
  }

  /** Gives a standby back to its queue; its slot is held until that is written. */
  private giveBack(payload: ClaimedPayload): void {
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
        this.ledger.givenBack(payload);
        this.doEffects();
      });
    this.inFlight.add(released);
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
