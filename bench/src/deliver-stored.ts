import type pg from 'pg';
import { request } from 'undici';
import { announcePayloadsReady } from '../../src/db/payloads-ready.js';

async function receiverCount(countUrl: string): Promise<number> {
  const response = await request(countUrl);
  return Number(await response.body.text());
}

/**
 * Lets a running service deliver `payloads` pending payloads of `webhookIds`
 * stored beforehand, and returns payloads per second: from the announcement
 * that payloads are ready to the last result recorded. It waits on the
 * receiver's count of POSTs (`countUrl`), then on the database for the last
 * results. Polling the database all along would charge the service with the
 * polls: the check is a scan of payloads, whose CPU would count as the
 * server's. A round in which not every payload ended delivered is void.
 */
export async function deliverStored(
  pool: pg.Pool,
  countUrl: string,
  webhookIds: readonly string[],
  payloads: number,
): Promise<number> {
  const before = await receiverCount(countUrl);
  const started = process.hrtime.bigint();
  await announcePayloadsReady(pool);
  let seen = before;
  let progressAt = performance.now();
  while (seen < before + payloads) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const count = await receiverCount(countUrl);
    if (count > seen) progressAt = performance.now();
    else if (performance.now() - progressAt > 60_000)
      throw new Error(
        `delivery bench: the receiver got ${count - before} of ${payloads} payloads and nothing for a minute`,
      );
    seen = count;
  }
  for (;;) {
    const { rows } = await pool.query<{ waiting: boolean }>(
      `select exists (select 1 from asset_webhooks.payloads
                      where webhook_id = any($1::text[]) and status in ('open', 'pending')) as waiting`,
      [webhookIds],
    );
    if (rows[0]?.waiting === false) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const rate = payloads / (Number(process.hrtime.bigint() - started) / 1e9);
  const { rows } = await pool.query<{ n: number }>(
    `select count(*)::int as n from asset_webhooks.payloads where webhook_id = any($1::text[]) and status = 'delivered'`,
    [webhookIds],
  );
  if (rows[0]?.n !== payloads)
    throw new Error(`delivery bench: ${rows[0]?.n ?? 0} of ${payloads} payloads were delivered; the run is void`);
  return rate;
}
