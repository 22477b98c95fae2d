import { describe, expect, it } from 'vitest';
import type { ClaimedPayload, ClaimRequest, SettleRequest } from '../../src/delivery/attempt-store.js';
import { SlotLedger, type LedgerEffect } from '../../src/delivery/slot-ledger.js';
import { STANDBY_MAX_WAIT_MS } from '../../src/delivery/standby.js';

// The pump's slot accounting (src/delivery/slot-ledger.ts, src/delivery/standby.ts),
// driven by hand on a clock the test moves: no database, no sockets, no sleeping.

function setUp(options: { cap?: number; standbyPerWebhook?: number } = {}) {
  let time = 1_000_000;
  const ledger = new SlotLedger({
    now: () => new Date(time),
    settings: () => ({ maxRequestsInFlight: options.cap ?? 8, deadLetterAfterSeconds: 3600 }),
    standbyPerWebhook: options.standbyPerWebhook,
  });
  return {
    ledger,
    advance: (ms: number) => (time += ms),
    /** The effects asked for since the last look, as `send 3`, `giveBack 4`, `claim`. */
    effects: () => ledger.takeEffects().map(show),
  };
}

let nextId = 1;
function payload(webhookId: string, standby = false): ClaimedPayload {
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

function settleOf(attempt: ClaimedPayload): SettleRequest {
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
    at: new Date(0),
    retryAt: null,
    receiverFailed: false,
    holdWebhookUntil: null,
  };
}

function show(effect: LedgerEffect): string {
  return effect.kind === 'claim' ? 'claim' : `${effect.kind} ${effect.payload.payloadId}`;
}

/** A claim of the pump's own that brings `payloads`. */
function claim(ledger: SlotLedger, payloads: ClaimedPayload[]): ClaimRequest {
  const request = ledger.beginClaim();
  expect(request).not.toBeNull();
  ledger.endClaim(request!, payloads);
  return request!;
}

describe('slot ledger: the cap', () => {
  it('claims the room under maxRequestsInFlight, and none while every slot is held or set aside', () => {
    const { ledger, effects } = setUp({ cap: 3 });
    const first = ledger.beginClaim()!;
    expect(first.max).toBe(3);
    // The room is set aside until the answer is in: a second claim finds none.
    expect(ledger.beginClaim()).toBeNull();
    const sent = [payload('a'), payload('b')];
    ledger.endClaim(first, sent);
    expect(effects()).toEqual(sent.map((p) => `send ${p.payloadId}`));
    expect(ledger.requestsInFlight).toBe(2);
    expect(ledger.beginClaim()!.max).toBe(1);
  });

  it('counts standbys against the cap though they are not requests in flight', () => {
    const { ledger } = setUp({ cap: 3 });
    claim(ledger, [payload('a'), payload('a', true), payload('a', true)]);
    expect(ledger.requestsInFlight).toBe(1);
    expect(ledger.room()).toBe(0);
    expect(ledger.beginClaim()).toBeNull();
  });

  it('frees a slot when its attempt ends, and asks for a claim then', () => {
    const { ledger, effects } = setUp({ cap: 1 });
    const [one] = [payload('a')];
    claim(ledger, [one!]);
    effects();
    expect(ledger.beginClaim()).toBeNull();
    ledger.answered(one!, true, 10);
    ledger.ended(one!);
    expect(effects()).toEqual(['claim']);
    expect(ledger.room()).toBe(1);
  });

  it('claims once the claim under way is in, when that claim alone left no room', () => {
    const { ledger, effects } = setUp({ cap: 2 });
    const sent = payload('a');
    claim(ledger, [sent]);
    effects();
    // The settle statement of `sent` sets the freed room aside for its own claim.
    ledger.answered(sent, true, 10);
    const batch = ledger.reserve([settleOf(sent)])!;
    expect(batch.max).toBe(2);
    // Work announced meanwhile: no room, only because of the batch's claim.
    expect(ledger.beginClaim()).toBeNull();
    ledger.claimed(batch, []);
    expect(effects()).toEqual(['claim']);
  });
});

describe('slot ledger: turns between webhooks', () => {
  it('gives one webhook at most a quarter of the room, and starts after the webhook the last claim ended with', () => {
    const { ledger } = setUp({ cap: 10 });
    const first = ledger.beginClaim()!;
    expect(first).toMatchObject({ max: 10, share: 3, after: null });
    ledger.endClaim(first, [payload('a'), payload('b'), payload('c')]);
    expect(ledger.beginClaim()).toMatchObject({ max: 7, share: 2, after: 'c' });
  });

  it('gives a share of at least one', () => {
    const { ledger } = setUp({ cap: 1 });
    expect(ledger.beginClaim()).toMatchObject({ max: 1, share: 1 });
  });
});

describe('slot ledger: a settle statement refills the slots it frees', () => {
  it('claims into the freed room in the statement, and the refilled attempt asks for no claim when it ends', () => {
    const { ledger, effects } = setUp({ cap: 2 });
    const [one, two] = [payload('a'), payload('b')];
    claim(ledger, [one!, two!]);
    effects();
    ledger.answered(one!, true, 10);
    const batch = ledger.reserve([settleOf(one!)])!;
    expect(batch).toMatchObject({ max: 1, after: 'b', sentStandbys: [] });
    const next = payload('a');
    ledger.claimed(batch, [next]);
    expect(effects()).toEqual([`send ${next.payloadId}`]);
    ledger.ended(one!);
    expect(effects()).toEqual([]);
    // An attempt over without a statement that claimed for it (not made, say) asks for a claim of the pump's own.
    ledger.answered(two!, false, 0);
    ledger.ended(two!);
    expect(effects()).toEqual(['claim']);
  });

  it("gives the room back when the statement fails, and asks for a claim of the pump's own", () => {
    const { ledger, effects } = setUp({ cap: 2 });
    const one = payload('a');
    claim(ledger, [one]);
    effects();
    ledger.answered(one, true, 10);
    const batch = ledger.reserve([settleOf(one)])!;
    expect(ledger.room()).toBe(0);
    ledger.release(batch);
    expect(ledger.room()).toBe(2);
    expect(effects()).toEqual(['claim']);
  });

  it('claims nothing in a statement that frees no slot of its own', () => {
    const { ledger } = setUp({ cap: 2 });
    expect(ledger.reserve([settleOf(payload('a'))])).toBeNull();
  });

  it('resolves whenEffects once a statement brings payloads, without any call from the pump', async () => {
    const { ledger } = setUp({ cap: 2 });
    const one = payload('a');
    claim(ledger, [one]);
    ledger.takeEffects();
    ledger.answered(one, true, 10);
    const batch = ledger.reserve([settleOf(one)])!;
    let woke = false;
    const waiting = ledger.whenEffects().then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    ledger.claimed(batch, [payload('b')]);
    await waiting;
    expect(woke).toBe(true);
  });
});

describe('slot ledger: standby', () => {
  /** A pump with two requests open to `a` and two standbys of `a` held. */
  function twoOpenTwoHeld(options: { cap?: number; standbyPerWebhook?: number } = {}) {
    const set = setUp(options);
    const requests = [payload('a'), payload('a')];
    const standbys = [payload('a', true), payload('a', true)];
    claim(set.ledger, [...requests, ...standbys]);
    expect(set.effects()).toEqual(requests.map((p) => `send ${p.payloadId}`));
    return { ...set, requests, standbys };
  }

  it('asks for standbys only for webhooks with requests open whose latest request was quick', () => {
    const { ledger } = setUp({ cap: 10 });
    expect(ledger.beginClaim()!.standby).toBeUndefined();
    const { ledger: busy } = twoOpenTwoHeld({ cap: 10 });
    expect(busy.beginClaim()!.standby).toEqual({ perWebhook: 2, webhooks: ['a'] });
    const slow = setUp({ cap: 10 });
    const [one, two] = [payload('a'), payload('a')];
    claim(slow.ledger, [one!, two!]);
    slow.ledger.answered(one!, true, STANDBY_MAX_WAIT_MS / 2);
    expect(slow.ledger.beginClaim()!.standby).toBeUndefined();
  });

  it('asks for none when standbyPerWebhook is 0', () => {
    const { ledger } = setUp({ cap: 10, standbyPerWebhook: 0 });
    claim(ledger, [payload('a')]);
    expect(ledger.beginClaim()!.standby).toBeUndefined();
  });

  it('holds a standby unsent until a request to its webhook ends, then sends exactly one in its place', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    expect(ledger.standby).toEqual({ held: 2, sent: 0, givenBack: 0 });
    expect(ledger.requestsInFlight).toBe(2);
    ledger.answered(requests[0]!, true, 10);
    expect(effects()).toEqual([`send ${standbys[0]!.payloadId}`]);
    // The ended request holds its slot until its result is written: two open, one ended and unwritten.
    expect(ledger.requestsInFlight).toBe(3);
    expect(ledger.standby).toEqual({ held: 1, sent: 1, givenBack: 0 });
    // The standby's sending is recorded by the next statement.
    expect(ledger.reserve([settleOf(requests[0]!)])!.sentStandbys).toEqual([
      { payloadId: standbys[0]!.payloadId, series: 1, attemptNo: 1 },
    ]);
  });

  it('never sends a standby of one webhook in place of a request to another', () => {
    const { ledger, effects, standbys } = twoOpenTwoHeld();
    const other = payload('b');
    const request = ledger.beginClaim()!;
    ledger.endClaim(request, [other]);
    effects();
    ledger.answered(other, true, 10);
    expect(effects()).toEqual([]);
    expect(ledger.standby.held).toBe(standbys.length);
  });

  it('never sends a standby a claim brings in place of an ended request to another webhook', () => {
    const { ledger, effects } = setUp({ cap: 8 });
    const [a, b] = [payload('a'), payload('b')];
    claim(ledger, [a!, b!]);
    effects();
    // b's request ended with no standby at hand: it stays replaceable, by a standby of b only.
    ledger.answered(b!, true, 10);
    const standbyOfA = payload('a', true);
    claim(ledger, [standbyOfA]);
    expect(effects()).toEqual([]);
    expect(ledger.standby.held).toBe(1);
  });

  it('reports a sent standby again in the next statement when the one that carried it failed', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    ledger.answered(requests[0]!, true, 10);
    effects();
    const sent = [{ payloadId: standbys[0]!.payloadId, series: 1, attemptNo: 1 }];
    const failed = ledger.reserve([settleOf(requests[0]!)])!;
    expect(failed.sentStandbys).toEqual(sent);
    ledger.release(failed);
    expect(ledger.reserve([settleOf(requests[0]!)])!.sentStandbys).toEqual(sent);
  });

  it('gives back every standby of a webhook whose receiver failed, and sends none: one attempt at a time while failing', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    ledger.answered(requests[0]!, false, 10);
    expect(effects()).toEqual(standbys.map((p) => `giveBack ${p.payloadId}`));
    expect(ledger.standby).toEqual({ held: 0, sent: 0, givenBack: 2 });
    // Their slots are held until the give-back is written.
    const room = ledger.room();
    ledger.givenBack(standbys[0]!);
    expect(effects()).toEqual(['claim']);
    expect(ledger.room()).toBe(room + 1);
  });

  it(`sends a standby at most ${STANDBY_MAX_WAIT_MS} ms after its claim, and gives back older ones`, () => {
    const { ledger, effects, advance, requests, standbys } = twoOpenTwoHeld();
    advance(STANDBY_MAX_WAIT_MS);
    ledger.answered(requests[0]!, true, 10);
    expect(effects()).toEqual([`send ${standbys[0]!.payloadId}`]);
    advance(1);
    ledger.answered(requests[1]!, true, 10);
    expect(effects()).toEqual([`giveBack ${standbys[1]!.payloadId}`]);
    expect(ledger.standby).toEqual({ held: 0, sent: 1, givenBack: 1 });
  });

  it('sends a standby a later claim brings in place of a request that ended before it came', () => {
    const { ledger, effects } = setUp({ cap: 8 });
    const [one, two] = [payload('a'), payload('a')];
    claim(ledger, [one!, two!]);
    effects();
    ledger.answered(one!, true, 10);
    expect(effects()).toEqual([]);
    const late = payload('a', true);
    claim(ledger, [late]);
    expect(effects()).toEqual([`send ${late.payloadId}`]);
  });

  it('no longer replaces a request once its result goes to be written, and gives back standbys nothing can use', () => {
    const { ledger, effects } = setUp({ cap: 8 });
    const one = payload('a');
    claim(ledger, [one]);
    effects();
    ledger.answered(one, true, 10);
    // Its result goes to the database: from now on it no longer counts there, so nothing may replace it.
    const batch = ledger.reserve([settleOf(one)])!;
    const late = payload('a', true);
    ledger.claimed(batch, [late]);
    // No request open to `a` and none replaceable: the standby is given back, not sent.
    expect(effects()).toEqual([`giveBack ${late.payloadId}`]);
  });

  it('gives back every standby when the pump stops, and claims no more', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    ledger.stop();
    expect(effects()).toEqual(standbys.map((p) => `giveBack ${p.payloadId}`));
    expect(ledger.beginClaim()).toBeNull();
    ledger.answered(requests[0]!, true, 10);
    expect(ledger.reserve([settleOf(requests[0]!)])).toBeNull();
  });
});
