import type pg from 'pg';
import { eventually } from './receiver.js';

/** The sum of a counter's series (every label set, or those matching `labels`) that a run process at `port` serves now. */
export async function counterSum(port: number, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let sum = 0;
  for (const match of text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm')))
    if ((match[1] ?? '').includes(labels)) sum += Number(match[2]);
  return sum;
}

/** Waits until the counter has grown by `count` from when called. */
async function counterPasses(port: number, name: string, labels: string, count: number, what: string): Promise<void> {
  const from = await counterSum(port, name, labels);
  await eventually(async () => ((await counterSum(port, name, labels)) >= from + count ? true : undefined), {
    timeoutMs: 15_000 + count * 5_000,
    what,
  });
}

/**
 * Waits until the pump of the process at `port` has ended `count` more claim
 * statements (asset_webhooks_delivery_claims_total) than when called. A claim
 * under way at the call may have read the queues before it, so a test that
 * asks "would the pump have sent this by now?" waits for two: the second began
 * after the call. Used where a test would otherwise sleep for the poll.
 */
export async function claimsPass(port: number, count = 2): Promise<void> {
  await counterPasses(port, 'asset_webhooks_delivery_claims_total', '', count, `${count} claims of the delivery pump`);
}

/**
 * Waits until the process at `port` has completed `count` more crash-recovery
 * and expiry sweeps (asset_webhooks_delivery_sweeps_total); two, so that one
 * began after the call.
 */
export async function sweepsPass(port: number, count = 2): Promise<void> {
  await counterPasses(
    port,
    'asset_webhooks_delivery_sweeps_total',
    'outcome="completed"',
    count,
    `${count} completed sweeps of the delivery pump`,
  );
}

/**
 * Moves the held lease of a `run` process (every running process's, without an id) 15
 * seconds into its past, as if it had held it that long: crash recovery
 * (asset_webhooks.process_gone_grace) counts its own lease's age on the
 * database's clock from taken_at, and tests move that instead of waiting.
 */
export async function settleLeases(pool: pg.Pool, processId?: string): Promise<number> {
  const { rowCount } = await pool.query(
    `update asset_webhooks.session_locks set taken_at = taken_at - interval '15 seconds'
     where name like 'process:%' and ($1::text is null or name = 'process:' || $1)
       and asset_webhooks.session_lock_held(name)`,
    [processId ?? null],
  );
  return rowCount ?? 0;
}
