import { describeError } from '../db/connect.js';
import { SCHEMA_CHANGED_CHANNEL } from '../db/payloads-ready.js';
import type { ClaimedPayload } from './attempt-store.js';
import { Claimer } from './claimer.js';
import type { DeliveryContext } from './context.js';
import { deliverClaimed, releaseClaimed } from './deliver.js';
import { listenForPayloads, type PayloadsListener } from './payloads-listener.js';
import { expireWaiting, recoverOrphans } from './recover.js';

/** How often the database is asked for due payloads when nothing woke the pump: the net for retries that come due and notifications lost with a connection. */
const POLL_MS = 1000;
/** How often attempts of dead processes are closed and expired payloads dead-lettered. */
const SWEEP_MS = 5000;

export interface PumpOptions {
  /** The database URL, for the connection that listens for new payloads. */
  readonly databaseUrl: string;
  /** Crash recovery's grace as this process sees it, read at each sweep (see processGoneGrace); null takes no process for gone. */
  goneGraceSeconds(): Promise<number | null>;
  /** Called when a claim fails, before the poll tries again (the service checks then whether the schema moved past this release). */
  claimFailed?(): void;
  /** Called when `migrate` notifies SCHEMA_CHANGED_CHANNEL, heard on the pump's listening connection. */
  schemaChanged?(): void;
}

/**
 * The delivery pump of one `run` process: it wires the three steps a payload
 * goes through, each in its own file, one way. The Claimer (claimer.ts)
 * claims due payloads up to maxRequestsInFlight and hands each on; the
 * sender step (deliverClaimed, deliver.ts) posts it, classifies the answer
 * and decides its next state; the Completer (completer.ts, the context's)
 * writes results in batches and claims nothing. A request in flight costs a
 * socket and a promise, not a worker. The pump reports each request's end and
 * each attempt's end to the claimer, which frees its slot and claims again.
 *
 * The pump wakes the claimer when coalescing in any process commits payloads
 * (a PayloadsListener, or wake() from this process) and every POLL_MS; every
 * SWEEP_MS it runs crash recovery and the expiry sweep. Nothing here runs in
 * graphile-worker: coalescing and maintenance never wait for delivery
 * capacity, however many requests are in flight.
 */
export class DeliveryPump {
  /** Every attempt and standby give-back of this pump until it has ended and is written. */
  private inFlight = new Set<Promise<void>>();
  private readonly claimer: Claimer;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private sweepFailures = 0;
  private poll: NodeJS.Timeout | undefined;
  private sweep: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private listener: PayloadsListener | undefined;

  constructor(
    private readonly context: DeliveryContext,
    private readonly options: PumpOptions,
  ) {
    this.claimer = new Claimer(
      context,
      { send: (payload) => this.send(payload), giveBack: (payload) => this.giveBack(payload) },
      () => options.claimFailed?.(),
    );
  }

  /** Starts claiming, listening and sweeping. */
  start(): void {
    this.poll = setInterval(() => this.wake(), POLL_MS);
    this.sweep = setInterval(() => {
      this.sweeping ??= this.runSweep().finally(() => {
        this.sweeping = undefined;
      });
    }, SWEEP_MS);
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
    return this.claimer.requestsInFlight;
  }

  /** Standby payloads held now, and since the start sent in place of ended requests or given back. */
  get standby(): { readonly held: number; readonly sent: number; readonly givenBack: number } {
    return this.claimer.standby;
  }

  /** Claims now (or right after the claim under way). */
  wake(): void {
    if (!this.stopped) this.claimer.wake();
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
    const claimerStopped = this.claimer.stop();
    await this.listener?.close();
    await this.sweeping;
    // A claim under way has started its attempts in the database: they are
    // made and written (its standbys given back) before stop returns, like
    // the others, not left for crash recovery.
    await claimerStopped;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** Makes a claimed attempt (a standby too, once the claimer sends it in place of an ended request). */
  private send(payload: ClaimedPayload): void {
    // Its attempt counts from now on (asset_webhooks.in_flight.sent): recorded before its result, and before the result it replaces.
    if (payload.standby) this.context.completer.markSent(payload);
    let ended = false;
    const sentAt = performance.now();
    const attempt: Promise<void> = deliverClaimed(payload, this.context, {
      answered: (receiverHealthy) => {
        ended = true;
        this.claimer.answered(payload, receiverHealthy, performance.now() - sentAt);
      },
      writing: () => this.claimer.writing(payload),
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
        if (!ended) this.claimer.answered(payload, false, performance.now() - sentAt);
        this.inFlight.delete(attempt);
        this.claimer.ended(payload);
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
        this.claimer.givenBack(payload);
      });
    this.inFlight.add(released);
  }

  private async runSweep(): Promise<void> {
    try {
      await recoverOrphans(this.context, await this.options.goneGraceSeconds());
      const expired = await expireWaiting(this.context);
      if (expired > 0) this.wake();
      this.sweepFailures = 0;
      this.context.onSweep?.('completed');
    } catch (error) {
      this.context.onSweep?.('failed');
      if (this.sweepFailures === 0)
        this.context.logger.warn(
          { err: describeError(error) },
          'delivery recovery and expiry sweep failed; trying again',
        );
      this.sweepFailures += 1;
    }
  }
}
