import os from 'node:os';
import type { CpuSplit } from './cpu.js';
import type { Measured } from './stats.js';

/**
 * One key of the bench's summary: its name (`section.figure`), its value (a
 * figure measured several times, or a single one), the digits it is rounded to
 * and its goal as printed (`report` for a figure without one).
 */
export interface Figure {
  readonly key: string;
  readonly value: Measured | number | boolean;
  readonly digits: number;
  readonly goal: string;
}

function isMeasured(value: Figure['value']): value is Measured {
  return typeof value === 'object';
}

/** The summary object of the results file and of `--json`: `{ section: { figure: value } }`, medians rounded. */
export function summaryOf(figures: readonly Figure[]): Record<string, Record<string, number | boolean>> {
  const summary: Record<string, Record<string, number | boolean>> = {};
  for (const { key, value, digits } of figures) {
    const dot = key.indexOf('.');
    const section = (summary[key.slice(0, dot)] ??= {});
    const figure = isMeasured(value) ? value.median : value;
    section[key.slice(dot + 1)] = typeof figure === 'number' ? round(figure, digits) : figure;
  }
  return summary;
}

/** The table printed at the end of a run: figure, median [min, max] (or the single value), goal. */
export function tableOf(figures: readonly Figure[]): string {
  const lines = [`\n${'figure'.padEnd(50)}${'median [min, max]'.padEnd(34)}goal`];
  for (const { key, value, digits, goal } of figures) {
    const shown = isMeasured(value)
      ? fmt(value, digits)
      : String(typeof value === 'number' ? round(value, digits) : value);
    lines.push(`${key.padEnd(50)}${shown.padEnd(34)}${goal}`);
  }
  return `${lines.join('\n')}\n`;
}

const PARTY_NAMES: Readonly<Record<string, string>> = { node: 'Node', postgres: 'PostgreSQL', receiver: 'receiver' };

export function cpuLine(split: CpuSplit<string>, digits: number): string {
  return Object.entries(split)
    .map(([party, value]) => `${PARTY_NAMES[party] ?? party} ${fmt(value, digits)}`)
    .join(', ');
}

/** `; CPUs busy 1.6 [1.5, 1.7] of 2`: whether the rate beside it is bound by the machine's CPUs or by waiting. */
export function busyLine(busy: Measured | undefined): string {
  return busy ? `; CPUs busy ${fmt(busy, 2)} of ${os.availableParallelism()}` : '';
}

export function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

export function fmt(m: { median: number; min: number; max: number }, digits = 3): string {
  const f = (v: number): string =>
    v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return `${f(m.median)} [${f(m.min)}, ${f(m.max)}]`;
}

/** The parts of the bench `--only` can name, in the order a run measures them. */
export const SECTIONS = [
  'write-cost',
  'coalesce',
  'tenants',
  'mirror',
  'delivery',
  'idle-webhooks',
  'latency',
  'isolation',
  'slow-receivers',
  'memory',
] as const;
export type Section = (typeof SECTIONS)[number];

/** The sections of `--only a,b,c` (every section without it); an unknown name is an error that lists the known ones. */
export function parseSections(only: string | undefined): ReadonlySet<Section> {
  if (only === undefined) return new Set(SECTIONS);
  const names = only
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  const unknown = names.filter((name) => !(SECTIONS as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0)
    throw new Error(`--only takes a comma-separated list of ${SECTIONS.join(', ')}; got ${JSON.stringify(only)}`);
  return new Set(names as Section[]);
}
