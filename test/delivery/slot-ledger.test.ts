import { describe, expect, it } from 'vitest';
import { claim, payload, setUp } from './ledger-fixtures.js';

// The pump's slot accounting (src/delivery/slot-ledger.ts, src/delivery/standby.ts),
// driven by hand on a clock the test moves: no database, no sockets, no sleeping.

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

  it('sends what a claim under way when the pump stopped brings, and gives its standbys back', () => {
    const { ledger, effects } = setUp({ cap: 4 });
    const request = ledger.beginClaim()!;
    ledger.stop();
    const sent = payload('a');
    const standby = payload('a', true);
    ledger.endClaim(request, [sent, standby]);
    expect(effects()).toEqual([`send ${sent.payloadId}`, `giveBack ${standby.payloadId}`]);
    expect(ledger.standby.held).toBe(0);
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
