import { describe, expect, it } from 'vitest';
import { STANDBY_MAX_WAIT_MS } from '../../src/delivery/standby.js';
import { claim, payload, setUp } from './ledger-fixtures.js';

// The standby rule (src/delivery/standby.ts) as the slot ledger applies it,
// on a clock the test moves: no database, no sockets, no sleeping.

describe('slot ledger: standby', () => {
  /** A pump with two requests open to `a` and two standbys of `a` held. */
  function twoOpenTwoHeld(options: { cap?: number } = {}) {
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

  it('holds a standby unsent until a request to its webhook ends, then sends exactly one in its place', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    expect(ledger.standby).toEqual({ held: 2, sent: 0, givenBack: 0 });
    expect(ledger.requestsInFlight).toBe(2);
    ledger.answered(requests[0]!, true, 10);
    expect(effects()).toEqual([`send ${standbys[0]!.payloadId}`]);
    // The ended request holds its slot until its result is written: two open, one ended and unwritten.
    expect(ledger.requestsInFlight).toBe(3);
    expect(ledger.standby).toEqual({ held: 1, sent: 1, givenBack: 0 });
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
    // Its result goes to the database: once written it no longer counts there, so nothing may replace it.
    ledger.writing(one);
    expect(effects()).toEqual([]);
    const late = payload('a', true);
    claim(ledger, [late]);
    // No request open to `a` and none replaceable: the standby is given back, not sent.
    expect(effects()).toEqual([`giveBack ${late.payloadId}`]);
  });

  it('gives back every standby when the pump stops, and claims no more', () => {
    const { ledger, effects, requests, standbys } = twoOpenTwoHeld();
    ledger.stop();
    expect(effects()).toEqual(standbys.map((p) => `giveBack ${p.payloadId}`));
    expect(ledger.beginClaim()).toBeNull();
    ledger.answered(requests[0]!, true, 10);
    expect(effects()).toEqual([]);
    expect(ledger.beginClaim()).toBeNull();
  });
});
