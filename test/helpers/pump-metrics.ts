import { eventually } from './receiver.js';

/** The sum of a counter's series (every label set) that a run process at `port` serves now. */
export async function counterSum(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let sum = 0;
  for (const match of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum += Number(match[1]);
  return sum;
}

/**
 * Waits until the pump of the process at `port` has ended `count` more claim
 * statements (asset_webhooks_delivery_claims_total) than when called. A claim
 * under way at the call may have read the queues before it, so a test that
 * asks "would the pump have sent this by now?" waits for two: the second began
 * after the call. Used where a test would otherwise sleep for the poll.
 */
export async function claimsPass(port: number, count = 2): Promise<void> {
  const from = await counterSum(port, 'asset_webhooks_delivery_claims_total');
  await eventually(
    async () => ((await counterSum(port, 'asset_webhooks_delivery_claims_total')) >= from + count ? true : undefined),
    { timeoutMs: 15_000, what: `${count} claims of the delivery pump` },
  );
}
