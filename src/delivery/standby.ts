import type { ClaimedPayload, ClaimRequest } from './attempt-store.js';

/**
 * The longest a standby waits to be sent after its claim; older ones are
 * given back. Crash recovery takes an attempt of a process that lost its
 * lease for interrupted requestTimeoutSeconds + 5 s after it started (see
 * asset_webhooks.process_gone_grace): a request sent this long after its claim still ends, by
 * its timeout, before that. Standbys are claimed only for webhooks whose
 * latest request took under half of it, so that slow receivers do not claim
 * standbys only to give them back.
 */
export const STANDBY_MAX_WAIT_MS = 2000;

/**
 * Standbys claimed per webhook of concurrency 2 or more beyond its
 * concurrency, while this process has requests open to it.
 */
export const STANDBY_PER_WEBHOOK = 2;

/** What the standby rule asks of the pump, in order: send a held standby, or give one back to its queue. */
export interface StandbyMove {
  readonly kind: 'sendStandby' | 'giveBack';
  readonly payload: ClaimedPayload;
}

/**
 * The standby rule, as bookkeeping with no I/O (the slot ledger applies its
 * moves; times are passed in, in ms).
 *
 * While the pump has requests open to a webhook, claims also take a few of
 * its payloads beyond its concurrency (see asset_webhooks.claim_payloads),
 * held here unsent. When a request to that webhook ends with a healthy answer
 * and its result is not yet handed to a statement, a standby is sent in its
 * place at once: the receiver's concurrency is kept, because the ended
 * request still counts in the database until its result is written, and a
 * slot is taken again without waiting for the database. An ended request with
 * no standby at hand stays replaceable until its result goes to be written, so
 * a standby that a claim brings meanwhile still replaces it. A standby is sent
 * within STANDBY_MAX_WAIT_MS of its claim or not at all. A standby that can no
 * longer be sent that way (its webhook's receiver failed, no request of the
 * pump is open to it or replaceable, the pump stops) is given back.
 *
 * Standbys hold slots of maxRequestsInFlight like requests (the ledger
 * counts them), which bounds the bodies kept in memory. A standby's attempt
 * counts once it is sent: the next statement that writes results says so (at
 * the latest the one that writes the result of the request it replaced);
 * until then crash recovery gives it back uncounted (asset_webhooks.in_flight.sent).
 */
export class Standbys {
  /** Per webhook, standbys held, oldest first, with when they were claimed. */
  private readonly held = new Map<string, Array<{ payload: ClaimedPayload; claimedAt: number }>>();
  /** Ended requests (attempt key → webhook) a standby may still replace. */
  private readonly replaceable = new Map<string, string>();
  /** Per webhook, how long its latest request took until it ended, ms. */
  private readonly lastRequestMs = new Map<string, number>();
  private count = 0;
  private sent = 0;
  private givenBack = 0;

  /** @param open per webhook, the pump's requests sent and not yet ended (read, never written, here). */
  constructor(private readonly open: ReadonlyMap<string, number>) {}

  /** Standbys held now, and since the start sent in place of ended requests or given back. */
  get stats(): { readonly held: number; readonly sent: number; readonly givenBack: number } {
    return { held: this.count, sent: this.sent, givenBack: this.givenBack };
  }

  /** What a claim asks for: standbys for the webhooks with requests open whose latest request was quick. */
  claimFor(): ClaimRequest['standby'] {
    const webhooks: string[] = [];
    for (const [webhookId, count] of this.open)
      if (count > 0 && (this.lastRequestMs.get(webhookId) ?? 0) < STANDBY_MAX_WAIT_MS / 2) webhooks.push(webhookId);
    return webhooks.length > 0 ? { perWebhook: STANDBY_PER_WEBHOOK, webhooks } : undefined;
  }

  /** Holds claimed standbys; each replaces at once an ended request of its webhook that is still replaceable. */
  hold(payloads: readonly ClaimedPayload[], claimedAt: number, now: number): StandbyMove[] {
    const moves: StandbyMove[] = [];
    const webhooks = new Set<string>();
    for (const payload of payloads) {
      const waiting = this.held.get(payload.webhookId);
      if (waiting) waiting.push({ payload, claimedAt });
      else this.held.set(payload.webhookId, [{ payload, claimedAt }]);
      this.count += 1;
      webhooks.add(payload.webhookId);
    }
    for (const webhookId of webhooks) {
      for (const [key, ended] of this.replaceable) {
        if (ended !== webhookId) continue;
        const next = this.take(webhookId, now, moves);
        if (!next) break;
        this.replaceable.delete(key);
        moves.push({ kind: 'sendStandby', payload: next });
      }
      this.releaseIfStranded(webhookId, moves);
    }
    return moves;
  }

  /**
   * A request (attempt `key`) has ended, its result not yet written, and the
   * pump no longer counts it open: send a standby in its place, or keep it
   * replaceable. A failing or throttling receiver, or a pump that stops, gets
   * its standbys given back: a failing receiver gets its retries' pace and
   * one attempt at a time.
   */
  answered(
    key: string,
    webhookId: string,
    receiverHealthy: boolean,
    requestMs: number,
    now: number,
    stopping: boolean,
  ): StandbyMove[] {
    this.lastRequestMs.set(webhookId, requestMs);
    const moves: StandbyMove[] = [];
    if (!receiverHealthy || stopping) {
      this.release(webhookId, moves);
      return moves;
    }
    const next = this.take(webhookId, now, moves);
    if (next) moves.push({ kind: 'sendStandby', payload: next });
    else this.replaceable.set(key, webhookId);
    return moves;
  }

  /**
   * The ended request's result goes to be written (or its attempt is over):
   * once written it no longer counts in the database, so nothing may replace it from now on.
   */
  settling(key: string): StandbyMove[] {
    const moves: StandbyMove[] = [];
    const webhookId = this.replaceable.get(key);
    if (webhookId === undefined) return moves;
    this.replaceable.delete(key);
    this.releaseIfStranded(webhookId, moves);
    return moves;
  }

  /** Gives back every standby held (the pump stops). */
  releaseAll(): StandbyMove[] {
    const moves: StandbyMove[] = [];
    for (const webhookId of [...this.held.keys()]) this.release(webhookId, moves);
    return moves;
  }

  /** The webhook's oldest standby that may still be sent; older ones are given back. */
  private take(webhookId: string, now: number, moves: StandbyMove[]): ClaimedPayload | undefined {
    for (let next = this.next(webhookId); next; next = this.next(webhookId)) {
      if (now - next.claimedAt <= STANDBY_MAX_WAIT_MS) {
        this.sent += 1;
        return next.payload;
      }
      this.giveBack(next.payload, moves);
    }
    return undefined;
  }

  private next(webhookId: string): { payload: ClaimedPayload; claimedAt: number } | undefined {
    const waiting = this.held.get(webhookId);
    const next = waiting?.shift();
    if (!next) return undefined;
    if (waiting!.length === 0) this.held.delete(webhookId);
    this.count -= 1;
    return next;
  }

  /** Gives back a webhook's standbys once nothing of the pump could be replaced by them any more. */
  private releaseIfStranded(webhookId: string, moves: StandbyMove[]): void {
    if (!this.held.has(webhookId) || (this.open.get(webhookId) ?? 0) > 0) return;
    for (const ended of this.replaceable.values()) if (ended === webhookId) return;
    this.release(webhookId, moves);
  }

  private release(webhookId: string, moves: StandbyMove[]): void {
    for (let next = this.next(webhookId); next; next = this.next(webhookId)) this.giveBack(next.payload, moves);
  }

  private giveBack(payload: ClaimedPayload, moves: StandbyMove[]): void {
    this.givenBack += 1;
    moves.push({ kind: 'giveBack', payload });
  }
}
