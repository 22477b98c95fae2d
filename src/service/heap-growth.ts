import v8 from 'node:v8';

/**
 * How far V8 may let the old generation grow past what survived the last full
 * collection before collecting again, in percent, in a `run` process. V8's own
 * heuristic lets it grow up to fourfold: draining a backlog, `run` keeps about
 * 30 MB alive and makes garbage fast, so its heap reached 110-125 MB between
 * full collections and its peak RSS 233-248 MB, for 16.3-17.0 s of CPU. At
 * 150 (2.5-fold) the same drain peaked at 188-195 MB for 16.3-18.0 s; at 100,
 * 175-178 MB for 17.7-18.6 s (PostgreSQL 15, one million events, three
 * alternating runs of each).
 */
export const RUN_HEAP_GROWING_PERCENT = 150;

const GIVEN = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * Applies `percent` as V8's heap growing factor unless the process was started
 * with `--heap-growing-percent` of its own (`node --heap-growing-percent=N
 * bin/asset-webhooks.js run`; 0 gives V8's own heuristic back), which wins.
 * V8 reads the factor at every full collection, so setting it after start-up
 * takes effect. Returns the percent in effect, or null when the command line's
 * is.
 */
export function limitHeapGrowth(percent: number = RUN_HEAP_GROWING_PERCENT, execArgv: readonly string[] = process.execArgv): number | null {
  if (execArgv.some((arg) => GIVEN.test(arg))) return null;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
