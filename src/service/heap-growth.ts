import v8 from 'node:v8';

/**
 * How far V8 may let the old generation grow past what survived the last full
 * collection before collecting again, in percent, in a `run` process. V8's own
 * heuristic lets it grow up to fourfold: draining a backlog, `run` keeps little
 * alive and makes garbage fast, so most of its peak RSS would be garbage not
 * collected yet. 2.5-fold keeps the peak well below that at about the same
 * CPU; lower costs CPU for little memory (bench/README.md has the figures).
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
export function limitHeapGrowth(
  percent: number = RUN_HEAP_GROWING_PERCENT,
  execArgv: readonly string[] = process.execArgv,
): number | null {
  if (execArgv.some((arg) => GIVEN.test(arg))) return null;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
