import { expect } from 'vitest';
import type { AttemptOf, ClaimedPayload, ClaimRequest, SettleRequest } from '../../src/delivery/attempt-store.js';
import { SlotLedger, type LedgerEffect } from '../../src/delivery/slot-ledger.js';

// Shared by slot-ledger.test.ts and standby.test.ts: a ledger on a clock the test moves.

export function setUp(options: { cap?: number } = {}) {
  let time = 1_000_000;
  const ledger = new SlotLedger({
    now: () => new Date(time),
    settings: () => ({ maxRequestsInFlight: options.cap ?? 8, deadLetterAfterSeconds: 3600 }),
  });
  return {
    ledger,
    advance: (ms: number) => (time += ms),
    /** The effects asked for since the last look, as `send 3`, `giveBack 4`, `claim`. */
    effects: () => ledger.takeEffects().map(show),
  };
}

let nextId = 1;
export function payload(webhookId: string, standby = false): ClaimedPayload {
  return {
    payloadId: nextId++,
    webhookId,
    series: 1,
    attemptNo: 1,
    seriesStartedAt: new Date(0),
    body: '{}',
    standby,
  };
}

/** A delivered result (a 200) of one attempt. */
export function settleOf(attempt: AttemptOf): SettleRequest {
  return {
    payload: { payloadId: attempt.payloadId, series: attempt.series },
    attemptNo: attempt.attemptNo,
    result: {
      durationMs: 5,
      statusCode: 200,
      errorClass: null,
      errorMessage: null,
      responseExcerpt: null,
      outcome: 'delivered',
    },
    retryInMs: null,
    windowSeconds: null,
    receiverFailed: false,
    holdWebhookForMs: null,
  };
}

function show(effect: LedgerEffect): string {
  return effect.kind === 'claim' ? 'claim' : `${effect.kind} ${effect.payload.payloadId}`;
}

/** A claim of the pump's own that brings `payloads`. */
export function claim(ledger: SlotLedger, payloads: ClaimedPayload[]): ClaimRequest {
  const request = ledger.beginClaim();
  expect(request).not.toBeNull();
  ledger.endClaim(request!, payloads);
  return request!;
}
