import v8 from 'node:v8';

/**
 * How far V8 may let the old generation grow past what survived the last full
 * collection before collecting again, in percent, in a `run` process. Draining
 * a backlog, `run` keeps little alive and makes garbage fast: with V8's own
 * heuristic, which lets the heap grow to several times what survived, most of
 * its peak RSS would be garbage not yet collected. A smaller factor collects
 * sooner and keeps the peak near what is alive; a much smaller one spends CPU
 * on collections for little memory. The measurements behind the value are in
 * bench/README.md.
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
