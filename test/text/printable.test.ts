import { describe, expect, it } from 'vitest';
import { printable, printableValues, quotedPrefix } from '../../src/text/printable.js';

describe('printable', () => {
  it.for([
    ['plain text, unchanged', 'summer 2026 é ü 日本', 'summer 2026 é ü 日本'],
    ['ESC of a colour sequence', 'k\u001b[31mRED\u001b[0m', 'k\\e[31mRED\\e[0m'],
    ['line breaks and tab', 'a\r\nb\tc', 'a\\r\\nb\\tc'],
    ['NUL, BEL and DEL', '\u0000\u0007\u007f', '\\u0000\\u0007\\u007f'],
    ['C1 controls (CSI)', '\u009b31m', '\\u009b31m'],
    ['bidirectional overrides and isolates', 'a\u202eb\u2066c\u2069', 'a\\u202eb\\u2066c\\u2069'],
    ['line and paragraph separators', 'a\u2028b\u2029', 'a\\u2028b\\u2029'],
    ['an unpaired surrogate, not a pair', '\ud800 \u{1f600}', '\\ud800 \u{1f600}'],
  ] as const)('%s', ([, text, expected]) => {
    expect(printable(text)).toBe(expected);
  });
});

describe('quotedPrefix', () => {
  it('quotes a short value whole', () => {
    expect(quotedPrefix('crm')).toBe('"crm"');
  });

  it('cuts a long value to 40 characters, with an ellipsis after the quote', () => {
    expect(quotedPrefix(`root:$6$${'x'.repeat(200)}`)).toBe(`"root:$6$${'x'.repeat(32)}"...`);
    expect(quotedPrefix('y'.repeat(40))).toBe(`"${'y'.repeat(40)}"`);
  });

  it('escapes what a terminal would act on, as JSON escapes', () => {
    expect(quotedPrefix('a\u001b[2J\u202e\u0085"')).toBe('"a\\u001b[2J\\u202e\\u0085\\""');
  });

  it('counts characters, never splitting a surrogate pair', () => {
    expect(quotedPrefix('\u{1f600}'.repeat(50))).toBe(`"${'\u{1f600}'.repeat(40)}"...`);
  });
});

describe('printableValues', () => {
  it('escapes every string of arrays and plain objects, keys too, and leaves other values as they are', () => {
    const when = new Date('2026-01-01T00:00:00Z');
    const escaped = printableValues({ a: ['x\ny', 1, null], ['k\u001b']: { when, id: 12n, text: '\u009b' } });
    expect(escaped).toEqual({ a: ['x\\ny', 1, null], ['k\\e']: { when, id: 12n, text: '\\u009b' } });
    expect((escaped as unknown as Record<string, { when: Date }>)['k\\e']!.when).toBe(when);
  });
});
