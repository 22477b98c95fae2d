import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { batchBody, Packer, type Batch, type PackLimits } from '../../src/payloads/pack.js';

// The packing rules of the spec (section 5, CONTRACT.md): a payload holds at
// most batchSize events (100 by default) and its body is at most
// maxPayloadBytes bytes (16 MiB by default); events stay in order of
// occurrence; a single event that can never fit is dead-lettered on its own.
// Sizes are checked against the real body (batchBody), in bytes of UTF-8.

const TIMESTAMP = '2026-11-27T09:15:00.004Z';
const MIB16 = 16 * 1024 * 1024;

/** A serialized event (a JSON string, so the body stays JSON) of exactly `bytes` UTF-8 bytes. */
function eventOf(bytes: number, fill = 'a'): string {
  const unit = Buffer.byteLength(fill);
  const units = Math.floor((bytes - 2) / unit);
  const event = `"${fill.repeat(units)}${'a'.repeat(bytes - 2 - units * unit)}"`;
  expect(Buffer.byteLength(event)).toBe(bytes);
  return event;
}

const bodySize = (batch: Batch): number => Buffer.byteLength(batchBody(batch, TIMESTAMP));

/** Packs events e0, e1, ... and returns every batch made, in the order first made. */
function pack(events: readonly string[], limits: PackLimits): Batch[] {
  const packer = new Packer('hook', limits);
  const batches: Batch[] = [];
  events.forEach((event, i) => {
    const batch = packer.add(`e${i}`, event);
    if (!batches.includes(batch)) batches.push(batch);
  });
  packer.finish();
  return batches;
}

/** The body bytes of one batch holding events of these sizes (an envelope is measured, not assumed). */
const bodyFor = (sizes: readonly number[]): number =>
  Buffer.byteLength(batchBody({ events: sizes.map((size) => eventOf(size)) } as unknown as Batch, TIMESTAMP));

describe('Packer: events per payload', () => {
  it('puts 100 events in one payload and the 101st in the next', () => {
    const batches = pack(
      Array.from({ length: 101 }, () => eventOf(10)),
      { batchSize: 100, maxPayloadBytes: MIB16 },
    );
    expect(batches.map((b) => b.events.length)).toEqual([100, 1]);
    expect(batches[0]!.sealed).toBe(true);
    expect(batches.every((b) => !b.tooLarge)).toBe(true);
  });

  it('seals a payload as soon as it holds batchSize events, before the run ends', () => {
    const packer = new Packer('hook', { batchSize: 100, maxPayloadBytes: MIB16 });
    let last: Batch | undefined;
    for (let i = 0; i < 100; i++) {
      last = packer.add(`e${i}`, eventOf(10));
      expect(last.sealed).toBe(i === 99);
    }
    const next = packer.add('e100', eventOf(10));
    expect(next).not.toBe(last);
    expect(next.sealed).toBe(false);
  });

  it('keeps a smaller batchSize', () => {
    const batches = pack(
      Array.from({ length: 7 }, () => eventOf(10)),
      { batchSize: 3, maxPayloadBytes: MIB16 },
    );
    expect(batches.map((b) => b.events.length)).toEqual([3, 3, 1]);
  });

  it('with batchSize 1 makes one payload per event', () => {
    const batches = pack([eventOf(10), eventOf(10)], { batchSize: 1, maxPayloadBytes: MIB16 });
    expect(batches.map((b) => [b.events.length, b.sealed])).toEqual([
      [1, true],
      [1, true],
    ]);
  });
});

describe('Packer: bytes per payload', () => {
  it('keeps a body of exactly maxPayloadBytes whole, and splits one a byte larger', () => {
    const limit = 1024;
    const first = 300;
    // The second event's size that makes a two-event body exactly `limit` bytes.
    const second = limit - bodyFor([first, 2]) + 2;
    const exact = pack([eventOf(first), eventOf(second)], { batchSize: 100, maxPayloadBytes: limit });
    expect(exact).toHaveLength(1);
    expect(bodySize(exact[0]!)).toBe(limit);

    const over = pack([eventOf(first), eventOf(second + 1)], { batchSize: 100, maxPayloadBytes: limit });
    expect(over.map((b) => b.events.length)).toEqual([1, 1]);
    expect(over.map((b) => b.tooLarge)).toEqual([false, false]);
    for (const batch of over) expect(bodySize(batch)).toBeLessThanOrEqual(limit);
  });

  it('holds a 16 MiB body exactly at the default limit and splits one a byte larger', () => {
    const first = 8 * 1024 * 1024;
    const second = MIB16 - bodyFor([first, 2]) + 2;
    const exact = pack([eventOf(first), eventOf(second)], { batchSize: 100, maxPayloadBytes: MIB16 });
    expect(exact).toHaveLength(1);
    expect(bodySize(exact[0]!)).toBe(MIB16);
    const over = pack([eventOf(first), eventOf(second + 1)], { batchSize: 100, maxPayloadBytes: MIB16 });
    expect(over.map((b) => b.events.length)).toEqual([1, 1]);
  });

  it('counts UTF-8 bytes, not characters', () => {
    const limit = 1024;
    // 'é' is one UTF-16 unit and two bytes: by characters these two would fit together.
    const event = eventOf(500, 'é');
    expect(event.length).toBeLessThan(300);
    const batches = pack([event, event], { batchSize: 100, maxPayloadBytes: limit });
    expect(batches.map((b) => b.events.length)).toEqual([1, 1]);

    // Four-byte characters (two UTF-16 units each) at exactly the limit still fit.
    const single = limit - bodyFor([2]) + 2;
    const emoji = pack([eventOf(single, '😀')], { batchSize: 100, maxPayloadBytes: limit });
    expect(emoji[0]!.tooLarge).toBe(false);
    expect(bodySize(emoji[0]!)).toBe(limit);
    expect(emoji[0]!.eventBytes).toBe(single);
  });
});

describe('Packer: an event larger than the limit', () => {
  const limit = 1024;
  const fitsAlone = limit - bodyFor([2]) + 2;

  it('fits when its body is exactly the limit', () => {
    const [batch] = pack([eventOf(fitsAlone)], { batchSize: 100, maxPayloadBytes: limit });
    expect(batch!.tooLarge).toBe(false);
  });

  it('is a payload of its own, sealed and marked too large, a byte over', () => {
    const batches = pack([eventOf(10), eventOf(fitsAlone + 1), eventOf(10)], {
      batchSize: 100,
      maxPayloadBytes: limit,
    });
    const tooLarge = batches.filter((b) => b.tooLarge);
    expect(tooLarge).toHaveLength(1);
    expect(tooLarge[0]!.eventIds).toEqual(['e1']);
    expect(tooLarge[0]!.sealed).toBe(true);
    expect(tooLarge[0]!.eventBytes).toBe(fitsAlone + 1);
    // It does not block the webhook: the events around it are packed as usual.
    const others = batches.filter((b) => !b.tooLarge);
    expect(others.flatMap((b) => b.eventIds)).toEqual(['e0', 'e2']);
    expect(others.every((b) => bodySize(b) <= limit)).toBe(true);
  });

  it('is reported by drain like any other payload', () => {
    const packer = new Packer('hook', { batchSize: 100, maxPayloadBytes: limit });
    const alone = packer.add('big', eventOf(fitsAlone + 1));
    expect(packer.drain()).toEqual([alone]);
  });
});

describe('Packer: order, state and draining', () => {
  it('keeps events and their ids together in order of occurrence across payloads', () => {
    const events = Array.from({ length: 250 }, (_, i) => eventOf(10 + (i % 40)));
    const batches = pack(events, { batchSize: 100, maxPayloadBytes: 1024 });
    expect(batches.flatMap((b) => b.events)).toEqual(events);
    expect(batches.flatMap((b) => b.eventIds)).toEqual(events.map((_, i) => `e${i}`));
    for (const batch of batches) {
      expect(batch.webhookId).toBe('hook');
      expect(batch.eventBytes).toBe(batch.events.reduce((sum, e) => sum + Buffer.byteLength(e), 0));
      expect(batch.payloadId).toBeNull();
      expect(batch.persisted).toBe(false);
    }
  });

  it('leaves the last payload open until finish', () => {
    const packer = new Packer('hook', { batchSize: 100, maxPayloadBytes: MIB16 });
    const batch = packer.add('e0', eventOf(10));
    expect(batch.sealed).toBe(false);
    packer.finish();
    expect(batch.sealed).toBe(true);
    expect(packer.add('e1', eventOf(10))).not.toBe(batch);
  });

  it('drains each changed payload once, then only those changed since', () => {
    const packer = new Packer('hook', { batchSize: 2, maxPayloadBytes: MIB16 });
    const first = packer.add('e0', eventOf(10));
    packer.add('e1', eventOf(10));
    const second = packer.add('e2', eventOf(10));
    expect(packer.drain()).toEqual([first, second]);
    expect(packer.drain()).toEqual([]);
    // An open payload filled further in a later chunk is drained again.
    packer.add('e3', eventOf(10));
    expect(packer.drain()).toEqual([second]);
    packer.finish();
    expect(packer.drain()).toEqual([]);
  });

  it('reports the payload finish seals when it was not drained since', () => {
    const packer = new Packer('hook', { batchSize: 100, maxPayloadBytes: MIB16 });
    const batch = packer.add('e0', eventOf(10));
    packer.drain();
    packer.finish();
    expect(packer.drain()).toEqual([batch]);
    expect(batch.sealed).toBe(true);
  });
});

describe('Packer: properties', () => {
  it('never exceeds either limit, keeps order, and starts a payload only when the next event does not fit', () => {
    const limitsArb = fc.record({
      batchSize: fc.integer({ min: 1, max: 100 }),
      maxPayloadBytes: fc.integer({ min: 1024, max: 4096 }),
    });
    const eventsArb = fc.array(
      fc.tuple(fc.integer({ min: 2, max: 1500 }), fc.constantFrom('a', 'é', '€', '😀')).map(([n, c]) => eventOf(n, c)),
      { maxLength: 150 },
    );
    fc.assert(
      fc.property(limitsArb, eventsArb, (limits, events) => {
        const batches = pack(events, limits);
        expect(batches.flatMap((b) => b.eventIds).sort()).toEqual(events.map((_, i) => `e${i}`).sort());
        const regular = batches.filter((b) => !b.tooLarge);
        expect(regular.flatMap((b) => b.events)).toEqual(
          events.filter((e) => bodyFor([Buffer.byteLength(e)]) <= limits.maxPayloadBytes),
        );
        for (const batch of batches) {
          expect(batch.sealed).toBe(true);
          if (batch.tooLarge) {
            expect(batch.events).toHaveLength(1);
            expect(bodySize(batch)).toBeGreaterThan(limits.maxPayloadBytes);
          } else {
            expect(batch.events.length).toBeLessThanOrEqual(limits.batchSize);
            expect(bodySize(batch)).toBeLessThanOrEqual(limits.maxPayloadBytes);
          }
        }
        // Greedy: a payload followed by another could not have taken the next one's first event.
        for (let i = 0; i + 1 < regular.length; i++) {
          const grown = { events: [...regular[i]!.events, regular[i + 1]!.events[0]!] } as unknown as Batch;
          const full = grown.events.length > limits.batchSize || bodySize(grown) > limits.maxPayloadBytes;
          expect(full).toBe(true);
        }
      }),
    );
  });
});
