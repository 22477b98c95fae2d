import type pg from 'pg';
import {
  settleAndClaim,
  type ClaimedPayload,
  type ClaimRequest,
  type SettleRequest,
  type Settled,
} from './attempt-store.js';

export interface SettleBatcherOptions {
  /** Most results written by one statement. Default 64. */
  readonly maxBatch?: number;
  /**
   * Most statements in flight at once. Default 1: every statement has a fixed
   * cost in the database besides its cost per result, so the fewer and fuller
   * the better. The price: a statement that waits (on the row lock of a
   * payload a coalescing chunk holds, on a connection that hangs until it
   * errors) holds up every result of the process meanwhile.
   */
  readonly maxInFlight?: number;
}

/**
 * Who fills the slots a batch frees (the delivery pump). Before a batch is
 * written, `reserve` says what to claim in the same transaction (null:
 * nothing), and sets that room aside; afterwards exactly one of `claimed` (with
 * the payloads claimed, possibly none) or `release` (the statement failed)
 * gives it back.
 */
export interface SlotClaimer {
  reserve(requests: readonly SettleRequest[]): ClaimRequest | null;
  claimed(claim: ClaimRequest, payloads: readonly ClaimedPayload[]): void;
  release(claim: ClaimRequest): void;
}

/**
 * Writes payloads' next states in batches: a request is written at once when
 * fewer than `maxInFlight` statements are in flight; otherwise it waits with
 * the others that come meanwhile and they are written together by one
 * statement (asset_webhooks.settle_and_claim) as soon as one finishes. A lone
 * result never waits for company, and a busy service pays one statement, one
 * transaction and one commit for many payloads instead of one each. With a
 * claimer, the same statement claims payloads for the slots the batch frees,
 * so a slot is taken again one round trip after its attempt ends.
 *
 * A batch is one transaction: if its statement fails, every request in it
 * gets the error, as each would have alone, and the caller tries it again.
 */
export class SettleBatcher {
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private waiting: Array<{
    request: SettleRequest;
    resolve: (settled: Settled) => void;
    reject: (error: unknown) => void;
  }> = [];
  private inFlight = 0;
  private claimer: SlotClaimer | undefined;

  constructor(
    private readonly pool: pg.Pool,
    options: SettleBatcherOptions = {},
  ) {
    this.maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 1);
  }

  /**
   * Sets (or, with undefined, removes) who fills the slots batches free. One
   * at a time: the claimer learns from `reserve` which of its ended requests
   * are being written, and a second claimer would never hear of its own.
   */
  claimWith(claimer: SlotClaimer | undefined): void {
    if (claimer !== undefined && this.claimer !== undefined && this.claimer !== claimer)
      throw new Error('a settle batcher serves one delivery pump: give each pump a delivery context of its own');
    this.claimer = claimer;
  }

  settle(request: SettleRequest): Promise<Settled> {
    return new Promise<Settled>((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.write();
    });
  }

  private write(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      const requests = batch.map((entry) => entry.request);
      const claimer = this.claimer;
      const claim = claimer?.reserve(requests) ?? null;
      this.inFlight += 1;
      settleAndClaim(this.pool, requests, claim)
        .then(
          ({ settled, claimed }) => {
            // The claimed attempts have started: they are handed over before the results, so that their slots are counted first.
            if (claim) claimer!.claimed(claim, claimed);
            batch.forEach((entry, index) => entry.resolve(settled[index]!));
          },
          (error: unknown) => {
            if (claim) claimer!.release(claim);
            batch.forEach((entry) => entry.reject(error));
          },
        )
        .finally(() => {
          this.inFlight -= 1;
          this.write();
        });
    }
  }
}
