import { describeError } from '../db/connect.js';
import { claimDue, type ClaimedPayload } from './attempt-store.js';
import type { DeliveryContext } from './context.js';
import { SlotLedger } from './slot-ledger.js';

/** Where the claimer hands what it claimed: the sender step, and the give-back of a standby nobody will send. */
export interface ClaimedSink {
  /** Make this attempt now (a standby's too, once it replaces an ended request). */
  send(payload: ClaimedPayload): void;
  /** Give this standby back to its queue; report givenBack once that is written. */
  giveBack(payload: ClaimedPayload): void;
}

/**
 * The first step of delivery: claims due payloads into this process's slots
 * (asset_webhooks.claim_payloads: per webhook within its concurrency, one at
 * a time while its receiver is failing, none while it is throttled; webhooks
 * take turns) and hands each to the sink. Its local queue is the standbys it
 * holds: payloads claimed ahead of the free slots, each sent the moment a
 * request to its webhook ends healthy (see Standbys). The SlotLedger keeps
 * the accounting; the claimer does its claims.
 *
 * It claims when woken (new payloads, the poll), and whenever an attempt or
 * a give-back it handed out is reported over. The steps after it report to
 * it through the pump; it calls nothing of theirs but the sink it hands
 * payloads to.
 */
export class Claimer {
  private readonly ledger: SlotLedger;
  private claiming = false;
  /** The claim under way, if any. */
  private claimRun: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private failures = 0;
  /** The next claim for webhooks held by their rate (see wakeIn). */
  private rateWake: { readonly at: number; readonly timer: NodeJS.Timeout } | undefined;

  constructor(
    private readonly context: DeliveryContext,
    private readonly sink: ClaimedSink,
    private readonly claimFailed?: () => void,
  ) {
    this.ledger = new SlotLedger({
      // Standbys' age in this process: no decision about a payload's window.
      now: () => new Date(),
      settings: () => context.settings(),
    });
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

  /** A request has ended, its result not yet written: a standby may take its place. */
  answered(payload: ClaimedPayload, receiverHealthy: boolean, requestMs: number): void {
    this.ledger.answered(payload, receiverHealthy, requestMs);
    this.follow();
  }

  /** The request's result goes to be written: a standby may no longer take its place. */
  writing(payload: ClaimedPayload): void {
    this.ledger.writing(payload);
    this.follow();
  }

  /** An attempt is over (its result written, or not to be written by this process): its slot is free. */
  ended(payload: ClaimedPayload): void {
    this.ledger.ended(payload);
    this.follow();
  }

  /** A standby's give-back is written: its slot is free in the database too. */
  givenBack(payload: ClaimedPayload): void {
    this.ledger.givenBack(payload);
    this.follow();
  }

  /**
   * Stops claiming and gives back the standbys held; resolves once the claim
   * under way, if any, is in (what it brings is sent, its standbys given back).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.rateWake?.timer);
    this.ledger.stop();
    this.follow();
    await this.claimRun;
  }

  /** Does what the ledger asks, in order. */
  private follow(): void {
    let claim = false;
    for (const effect of this.ledger.takeEffects()) {
      if (effect.kind === 'send') this.sink.send(effect.payload);
      else if (effect.kind === 'giveBack') this.sink.giveBack(effect.payload);
      else claim = true;
    }
    if (claim) this.wake();
  }

  private async claimWhileFree(): Promise<void> {
    do {
      this.again = false;
      if (this.stopped) return;
      const request = this.ledger.beginClaim();
      // No room: an attempt that ends claims again.
      if (!request) return;
      let claimed: ClaimedPayload[];
      try {
        const claim = await claimDue(this.context.pool, request);
        claimed = claim.claimed;
        if (claim.wakeInMs !== null) this.wakeIn(claim.wakeInMs);
      } catch (error) {
        this.ledger.endClaim(request, undefined);
        this.failed(error);
        return;
      }
      if (this.failures > 0)
        this.context.logger.info({ failedClaims: this.failures }, 'delivery claims payloads again');
      this.failures = 0;
      this.ledger.endClaim(request, claimed);
      this.context.onClaim?.(claimed.length);
      this.follow();
      // A webhook may have had more than its share: ask again while there is room.
      if (claimed.length > 0) this.again = true;
    } while (this.again && !this.stopped);
  }

  /**
   * Claims again in `ms` (a webhook held by its rateLimit has its next token
   * then), unless a wake-up sooner is set already. Node's clock only measures
   * the wait: the database decides, at that claim, whether the token is there.
   */
  private wakeIn(ms: number): void {
    const at = performance.now() + ms;
    if (this.rateWake !== undefined && this.rateWake.at <= at) return;
    clearTimeout(this.rateWake?.timer);
    const timer = setTimeout(() => {
      this.rateWake = undefined;
      this.wake();
    }, ms);
    timer.unref();
    this.rateWake = { at, timer };
  }

  /** The poll tries again; one warning per failing spell. */
  private failed(error: unknown): void {
    this.claimFailed?.();
    if (this.failures === 0)
      this.context.logger.warn({ err: describeError(error) }, 'could not claim payloads for delivery; trying again');
    this.failures += 1;
  }
}
