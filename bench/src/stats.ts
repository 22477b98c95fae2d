/** A figure measured several times: the median, with the spread. */
export interface Measured {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly runs: readonly number[];
}

export function measured(runs: readonly number[]): Measured {
  const sorted = [...runs].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { median, min: sorted[0]!, max: sorted.at(-1)!, runs };
}

/** The ratio of two medians, with the spread of the per-run ratios. */
export function ratio(numerator: readonly number[], denominator: readonly number[]): Measured {
  return { ...pairedRatio(numerator, denominator), median: measured(numerator).median / measured(denominator).median };
}

/**
 * The median of per-pair ratios, for pairs whose two sides were measured back
 * to back: drift of the machine between pairs then cancels out.
 */
export function pairedRatio(numerator: readonly number[], denominator: readonly number[]): Measured {
  return measured(numerator.map((value, index) => value / denominator[index]!));
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Commit-to-receipt latency beyond the coalescing interval, per asset event
 * received on a path that `wanted` accepts: how long after the run that was
 * due an event reached its receiver.
 */
export function latenciesOverInterval(
  received: ReadonlyArray<{ at: number; path: string; assetIds: readonly number[] }>,
  committedAt: ReadonlyMap<number, number>,
  wanted: (path: string) => boolean,
  intervalMs: number,
): number[] {
  const latencies: number[] = [];
  for (const request of received) {
    if (!wanted(request.path)) continue;
    for (const assetId of request.assetIds) {
      const committed = committedAt.get(assetId);
      if (committed !== undefined) latencies.push(request.at - committed - intervalMs);
    }
  }
  return latencies;
}
