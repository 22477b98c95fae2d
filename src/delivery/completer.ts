import type pg from 'pg';
import { describeError } from '../db/connect.js';
import { storableMessage } from './http/sender.js';
import {
  completeAttempts,
  isTransientWriteError,
  type AttemptOf,
  type SettleRequest,
  type Settled,
} from './attempt-store.js';

/** Most results written by one statement. */
const MAX_BATCH = 64;
/**
 * Every statement has a fixed cost in the database well above its cost per
 * result (bench/README.md), so one statement is in flight at a time and the
 * results that come meanwhile wait to go together. A second one starts only
 * beside a statement that has run for STALLED_MS: one that waits (on the row
 * lock of a payload a coalescing chunk holds) then holds up no other result
 * for longer than that.
 */
const MAX_IN_FLIGHT = 2;
/** How long a statement runs before a second one may start beside it: many times what one takes when nothing waits. */
export const STALLED_MS = 50;

interface Entry {
  readonly request: SettleRequest;
  resolve(settled: Settled): void;
  reject(error: unknown): void;
}

/**
 * The last step of delivery: writes payloads' next states in batches. A
 * request is written at once when no statement is in flight; otherwise it
 * waits with the others that come meanwhile, and they are written together by
 * one statement (asset_webhooks.complete_attempts) as soon as that one
 * finishes (or has stalled: STALLED_MS). A lone result never waits for company, and a busy
 * service pays one statement, one transaction and one commit for many
 * payloads instead of one each. It never claims, and calls nothing of the
 * steps before it: the slot a result frees is taken again by the claimer.
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
export class Completer {
  private waiting: Entry[] = [];
  /** Standbys sent whose sending no statement has recorded yet. */
  private sent: AttemptOf[] = [];
  /** The statements in flight, oldest first: when each started (performance.now()), and whether it records standbys sent. */
  private readonly running: Array<{ readonly at: number; readonly marks: boolean }> = [];
  /** Set while a statement runs and results wait: starts a second one once the first has stalled. */
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(private readonly pool: pg.Pool | pg.ClientBase) {}

  settle(request: SettleRequest): Promise<Settled> {
    return new Promise<Settled>((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.write();
    });
  }

  /**
   * A standby's request has been sent: the next statement records it (see
   * asset_webhooks.in_flight.sent). That is at the latest the statement of the
   * result it replaced, which is handed over after this.
   */
  markSent(attempt: AttemptOf): void {
    const { payloadId, series, attemptNo } = attempt;
    this.sent.push({ payloadId, series, attemptNo });
  }

  private write(): void {
    while (this.waiting.length > 0 && this.mayStart()) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      const sent = this.sent.splice(0);
      const statement = { at: performance.now(), marks: sent.length > 0 };
      this.running.push(statement);
      void this.writeBatch(batch, sent).finally(() => {
        this.running.splice(this.running.indexOf(statement), 1);
        clearTimeout(this.stallTimer);
        this.stallTimer = undefined;
        this.write();
      });
    }
    const first = this.running[0];
    if (this.waiting.length > 0 && this.running.length === 1 && !first!.marks && this.stallTimer === undefined) {
      // Node's clock measures only how long the statement has run.
      const wait = Math.max(first!.at + STALLED_MS - performance.now(), 0);
      this.stallTimer = setTimeout(() => {
        this.stallTimer = undefined;
        this.write();
      }, wait);
      this.stallTimer.unref();
    }
  }

  /**
   * Whether a statement may start now: none in flight, or one that has run
   * STALLED_MS already and records no standby sent. A claim counts a
   * webhook's requests by in_flight.sent, and the request a standby replaced
   * still counts until its result is written; that result is handed over
   * after the standby's mark, so it is written by the statement that records
   * the mark or a later one. A later one that overtook it would leave a
   * moment in which neither counts, and a claim then would send one request
   * more than the concurrency.
   */
  private mayStart(): boolean {
    const first = this.running[0];
    if (first === undefined) return true;
    return this.running.length < MAX_IN_FLIGHT && !first.marks && performance.now() - first.at >= STALLED_MS;
  }

  private async writeBatch(batch: readonly Entry[], sent: readonly AttemptOf[]): Promise<void> {
    let settled: Settled[];
    try {
      settled = await completeAttempts(
        this.pool,
        batch.map((entry) => entry.request),
        sent,
      );
    } catch (error) {
      if (isTransientWriteError(error)) {
        // The next statement records them instead, with these results or before them.
        this.sent.unshift(...sent);
        for (const entry of batch) entry.reject(error);
        return;
      }
      // The standbys first (see mayStart), then one result at a time: this is
      // the rare path, and it must not crowd out the batches behind it.
      await this.recordSent(sent);
      for (const entry of batch) await this.writeAlone(entry, batch.length === 1 ? error : undefined);
      return;
    }
    batch.forEach((entry, index) => entry.resolve(settled[index]!));
  }

  /** Records standbys sent by a statement of their own; the next statement records them if that fails. */
  private async recordSent(sent: readonly AttemptOf[]): Promise<void> {
    if (sent.length === 0) return;
    try {
      await completeAttempts(this.pool, [], sent);
    } catch {
      this.sent.unshift(...sent);
    }
  }

  /**
   * Writes one result by itself; if the database refuses it (or already did:
   * `refused`), writes it as unrecordable instead. Settles the entry either way.
   */
  private async writeAlone(entry: Entry, refused?: unknown): Promise<void> {
    let error = refused;
    if (error === undefined) {
      try {
        entry.resolve((await completeAttempts(this.pool, [entry.request]))[0]!);
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
      entry.resolve((await completeAttempts(this.pool, [unrecordable(entry.request, error)]))[0]!);
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
 * integer column cannot hold and delays that are not finite left out. The payload's next state is the one its policy
 * decided (a retry whose delay is not finite is due at once), so it goes on
 * with its schedule.
 */
export function unrecordable(request: SettleRequest, error: unknown): SettleRequest {
  const { result } = request;
  const int = (value: number | null): number | null =>
    value !== null && Number.isInteger(value) && Math.abs(value) <= MAX_INT4 ? value : null;
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
    retryInMs: result.outcome === 'retry' ? (delay(request.retryInMs) ?? 0) : null,
    windowSeconds: delay(request.windowSeconds),
    holdWebhookForMs: delay(request.holdWebhookForMs),
  };
}
