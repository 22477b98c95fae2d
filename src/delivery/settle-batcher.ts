import type pg from 'pg';
import { describeError } from '../db/connect.js';
import { storableMessage } from './http/sender.js';
import {
  isTransientWriteError,
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
 * Who accounts for the slots a batch frees (the delivery pump's SlotLedger:
 * bookkeeping, no I/O; the pump acts on what it records, so the batcher never
 * calls into the pump). Before a batch is written, `reserve` says what to
 * claim in the same transaction (null: nothing), and sets that room aside;
 * afterwards exactly one of `claimed` (with the payloads claimed, possibly
 * none) or `release` (the statement failed) gives it back.
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
 * A batch is one transaction, so one result the database refuses would fail
 * the others with it. When a batch's statement fails in a way that the same
 * statement may not when run again (isTransientWriteError: a lost
 * connection, one this process could not open for want of descriptors, a
 * deadlock), every request in it gets the error and the caller tries it
 * again. When it fails for any other reason, the batch is split and
 * each result written alone, so the others are written whatever one of them
 * holds. A result that still cannot be written is written as an
 * `unrecordable` result (see unrecordable): the attempt is closed as failed
 * with the reason, and the payload goes on with the next state its policy
 * decided. Only if that fails too does its request get the error.
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
   * Sets (or, with undefined, removes) who accounts for the slots batches
   * free. One at a time: the claimer learns from `reserve` which of its ended
   * requests are being written, and a second claimer would never hear of its own.
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
          async (error: unknown) => {
            if (claim) claimer!.release(claim);
            if (isTransientWriteError(error)) {
              batch.forEach((entry) => entry.reject(error));
              return;
            }
            // One at a time: this is the rare path, and it must not crowd out the batches behind it.
            for (const entry of batch) await this.writeAlone(entry, batch.length === 1 ? error : undefined);
          },
        )
        .finally(() => {
          this.inFlight -= 1;
          this.write();
        });
    }
  }

  /**
   * Writes one result by itself; if the database refuses it (or already did:
   * `refused`), writes it as unrecordable instead. Settles the entry either way.
   */
  private async writeAlone(
    entry: { request: SettleRequest; resolve: (settled: Settled) => void; reject: (error: unknown) => void },
    refused?: unknown,
  ): Promise<void> {
    let error = refused;
    if (error === undefined) {
      try {
        entry.resolve((await settleAndClaim(this.pool, [entry.request], null)).settled[0]!);
        return;
      } catch (alone) {
        if (isTransientWriteError(alone)) {
          entry.reject(alone);
          return;
        }
        error = alone;
      }
    }
    try {
      entry.resolve((await settleAndClaim(this.pool, [unrecordable(entry.request, error)], null)).settled[0]!);
    } catch (fallback) {
      entry.reject(fallback);
    }
  }
}

/** The largest value of a PostgreSQL integer column. */
const MAX_INT4 = 2 ** 31 - 1;

/**
 * A result the database refused, as it can always be written: the attempt
 * failed as `unrecordable`, its message saying why (the database's error,
 * and the status or error class the attempt had); no excerpt; numbers an
 * integer column cannot hold, dates that are not valid and delays that are
 * not finite left out. The payload's next state is the one its policy
 * decided (a retry whose delay is not finite is due at once), so it goes on
 * with its schedule.
 */
export function unrecordable(request: SettleRequest, error: unknown): SettleRequest {
  const { result } = request;
  const int = (value: number | null): number | null =>
    value !== null && Number.isInteger(value) && Math.abs(value) <= MAX_INT4 ? value : null;
  const date = (value: Date | null | undefined): Date | null =>
    value instanceof Date && Number.isFinite(value.getTime()) ? value : null;
  const delay = (value: number | null): number | null => (value !== null && Number.isFinite(value) ? value : null);
  const had = result.statusCode !== null ? `status ${String(result.statusCode).slice(0, 16)}` : result.errorClass;
  return {
    ...request,
    result: {
      durationMs: int(result.durationMs),
      statusCode: int(result.statusCode),
      errorClass: 'unrecordable',
      errorMessage: storableMessage(
        `the attempt's result${had ? ` (${had})` : ''} could not be recorded: ${describeError(error)}`,
      ),
      responseExcerpt: null,
      outcome: result.outcome,
    },
    at: date(request.at),
    retryInMs: result.outcome === 'retry' ? (delay(request.retryInMs) ?? 0) : null,
    windowSeconds: delay(request.windowSeconds),
    holdWebhookForMs: delay(request.holdWebhookForMs),
    sentAt: date(request.sentAt),
  };
}
