import type pg from 'pg';
import { settlePayloads, type SettleRequest, type Settled } from './attempt-store.js';

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
 * Writes payloads' next states in batches: a request is written at once when
 * fewer than `maxInFlight` statements are in flight; otherwise it waits with
 * the others that come meanwhile and they are written together by one
 * statement (asset_webhooks.settle_payloads) as soon as one finishes. A lone
 * result never waits for company, and a busy service pays one statement, one
 * transaction and one commit for many payloads instead of one each.
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

  constructor(
    private readonly pool: pg.Pool,
    options: SettleBatcherOptions = {},
  ) {
    this.maxBatch = Math.max(1, options.maxBatch ?? 64);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 1);
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
      this.inFlight += 1;
      settlePayloads(
        this.pool,
        batch.map((entry) => entry.request),
      )
        .then(
          (answers) => batch.forEach((entry, index) => entry.resolve(answers[index] as Settled)),
          (error: unknown) => batch.forEach((entry) => entry.reject(error)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.write();
        });
    }
  }
}
