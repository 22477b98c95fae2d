import type { AttemptOf, ClaimedPayload, ClaimRequest } from './attempt-store.js';
import { Standbys, type StandbyMove } from './standby.js';

/** What the ledger asks of the pump, in order: make an attempt (a standby's too), give a standby back, or claim. */
export type LedgerEffect =
  | { readonly kind: 'send'; readonly payload: ClaimedPayload }
  | { readonly kind: 'giveBack'; readonly payload: ClaimedPayload }
  | { readonly kind: 'claim' };

export interface LedgerSettings {
  /** This process's cap over all webhooks: attempts holding a slot, standbys included. */
  readonly maxRequestsInFlight: number;
  readonly deadLetterAfterSeconds: number;
}

export interface SlotLedgerOptions {
  /** The clock claims are made at and standbys' age is read from. */
  readonly now: () => Date;
  /** The current settings, read at every claim. */
  readonly settings: () => LedgerSettings;
}

/**
 * The claimer's slot accounting, with no I/O: which claims to make,
 * and what to do with the payloads they bring and the attempts that end. The
 * pump does the I/O and reports back; the ledger calls nothing: what it asks
 * of the pump waits in takeEffects, which the pump reads after each report.
 *
 * The rules it keeps (the database keeps the rest, across processes: each
 * webhook's concurrency, one attempt at a time while it fails, none while it
 * is throttled; see asset_webhooks.claim_payloads):
 * - the cap: attempts holding a slot, standbys, and room set aside for the
 *   claim under way never pass maxRequestsInFlight together. A slot is held
 *   from an attempt's claim until its attempt is over; a claim sets its room
 *   aside until its answer is in.
 * - turns: each claim starts after the webhook the previous one ended with,
 *   and gives one webhook at most a quarter of its room (at least one).
 * - refill: every attempt that ends asks for a claim; the statements that
 *   write results claim nothing.
 * - standby (see Standbys): a standby holds a slot, is sent only in place of
 *   an ended request to its webhook (so the receiver never sees more than its
 *   concurrency), and is given back when its receiver fails. The pump has the
 *   completer record it sent when it sends it.
 */
export class SlotLedger {
  /** The attempts (attemptKey) that hold a slot: requests and standbys. */
  private readonly slots = new Set<string>();
  /** Slots set aside for the claim under way. */
  private reserved = 0;
  /** Per webhook, requests sent and not yet ended. */
  private readonly open = new Map<string, number>();
  private cursor: string | null = null;
  private stopping = false;
  private effects: LedgerEffect[] = [];
  private readonly standbys: Standbys;

  constructor(private readonly options: SlotLedgerOptions) {
    this.standbys = new Standbys(this.open);
  }

  /** Requests in flight now (standbys held are not). */
  get requestsInFlight(): number {
    return this.slots.size - this.standbys.stats.held;
  }

  get standby(): { readonly held: number; readonly sent: number; readonly givenBack: number } {
    return this.standbys.stats;
  }

  /** Room under the cap not held or set aside. */
  room(): number {
    return this.options.settings().maxRequestsInFlight - this.slots.size - this.reserved;
  }

  /** Effects asked for since the last call, oldest first. */
  takeEffects(): LedgerEffect[] {
    return this.effects.splice(0);
  }

  /** A claim of the pump's own: sets its room aside, or null when there is none (or the pump stops). */
  beginClaim(): ClaimRequest | null {
    if (this.stopping) return null;
    const free = this.room();
    if (free <= 0) return null;
    this.reserved += free;
    return this.claimRequest(free);
  }

  /** The claim's answer: the payloads it claimed, or undefined when it failed. */
  endClaim(claim: ClaimRequest, payloads: readonly ClaimedPayload[] | undefined): void {
    this.reserved -= claim.max;
    if (payloads) this.accept(payloads, claim.now);
  }

  /** A request has ended (its result not yet written); `receiverHealthy` as deliverClaimed's `answered` says. */
  answered(payload: ClaimedPayload, receiverHealthy: boolean, requestMs: number): void {
    const open = (this.open.get(payload.webhookId) ?? 1) - 1;
    if (open > 0) this.open.set(payload.webhookId, open);
    else this.open.delete(payload.webhookId);
    this.apply(
      this.standbys.answered(
        attemptKey(payload),
        payload.webhookId,
        receiverHealthy,
        requestMs,
        this.options.now().getTime(),
        this.stopping,
      ),
    );
  }

  /**
   * A request's result goes to be written: once it is, the request no longer
   * counts in the database, and a claim may give its slot to another request;
   * a standby sent in its place after that would pass the concurrency.
   */
  writing(payload: ClaimedPayload): void {
    this.apply(this.standbys.settling(attemptKey(payload)));
  }

  /** An attempt is over: its result written, or not to be written by this process. */
  ended(payload: ClaimedPayload): void {
    const key = attemptKey(payload);
    this.apply(this.standbys.settling(key));
    this.slots.delete(key);
    this.effects.push({ kind: 'claim' });
  }

  /** A standby given back is written: its slot is free in the database too. */
  givenBack(payload: ClaimedPayload): void {
    this.slots.delete(attemptKey(payload));
    this.effects.push({ kind: 'claim' });
  }

  /** The pump stops: no more claims, and every standby is given back. */
  stop(): void {
    this.stopping = true;
    this.apply(this.standbys.releaseAll());
  }

  private claimRequest(max: number): ClaimRequest {
    return {
      now: this.options.now(),
      max,
      share: Math.max(1, Math.ceil(max / 4)),
      after: this.cursor,
      expireAfterSeconds: this.options.settings().deadLetterAfterSeconds,
      standby: this.standbys.claimFor(),
    };
  }

  /** Takes claimed payloads: a request is sent, a standby held (and sent at once if an ended request may take it). */
  private accept(payloads: readonly ClaimedPayload[], claimedAt: Date): void {
    const standbys: ClaimedPayload[] = [];
    for (const payload of payloads) {
      if (!payload.standby) this.send(payload);
      else {
        this.slots.add(attemptKey(payload));
        // Claimed while the pump stops (a claim under way when stop began): given back as stop gave back the others.
        if (this.stopping) this.effects.push({ kind: 'giveBack', payload });
        else standbys.push(payload);
      }
    }
    this.apply(this.standbys.hold(standbys, claimedAt.getTime(), this.options.now().getTime()));
    if (payloads.length > 0) this.cursor = payloads[payloads.length - 1]!.webhookId;
  }

  private send(payload: ClaimedPayload): void {
    this.slots.add(attemptKey(payload));
    this.open.set(payload.webhookId, (this.open.get(payload.webhookId) ?? 0) + 1);
    this.effects.push({ kind: 'send', payload });
  }

  private apply(moves: readonly StandbyMove[]): void {
    for (const move of moves) {
      if (move.kind === 'giveBack') this.effects.push({ kind: 'giveBack', payload: move.payload });
      else this.send(move.payload);
    }
  }
}

function attemptKey(attempt: AttemptOf): string {
  return `${attempt.payloadId}/${attempt.series}/${attempt.attemptNo}`;
}
