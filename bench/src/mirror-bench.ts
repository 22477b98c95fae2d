import type pg from 'pg';
import { pino } from 'pino';
import { coalesce } from '../../src/coalesce/run.js';
import type { RoutedWebhook } from '../../src/coalesce/routed-webhooks.js';
import { ROUTING_FEATURES } from '../../src/service/routing-features.js';
import { EVENT_TYPES } from '../../src/interfaces.js';
import { clearResults, fillOutbox, registerBenchWebhooks } from './coalesce-bench.js';
import { measured, pairedRatio, type Measured } from './stats.js';

export interface MirrorBenchResult {
  /** Coalescing rate with the webhooks as mirror webhooks, events per second. */
  readonly mirrorEventsPerSecond: Measured;
  /** The same webhooks without mirror. */
  readonly plainEventsPerSecond: Measured;
  /** Mirror ÷ plain, per pair of runs measured back to back. */
  readonly coalesceRatio: Measured;
  /** asset_webhooks.mirror_members with its index, bytes per row, after the runs. */
  readonly bytesPerMember: number;
  readonly members: number;
}

/**
 * What mirror webhooks cost coalescing: the same outbox rows coalesced by
 * the same webhooks, once as plain webhooks and once as mirror webhooks, in
 * alternating order. Every webhook takes all event types, as a mirror
 * webhook must, in both runs. The set is filled by one mirror run first, so
 * that the measured runs read and update members as a running service does.
 */
export async function measureMirror(
  pool: pg.Pool,
  webhooks: readonly RoutedWebhook[],
  options: { events: number; assets: number; repeats: number },
): Promise<MirrorBenchResult> {
  const plain = webhooks.map((webhook) => ({ ...webhook, eventTypes: [...EVENT_TYPES], mirror: false }));
  const mirror = plain.map((webhook) => ({ ...webhook, mirror: true }));
  await registerBenchWebhooks(pool, plain);
  await pool.query('truncate asset_webhooks.mirror_members');
  const run = async (routed: readonly RoutedWebhook[]): Promise<number> => {
    await fillOutbox(pool, options.events, options.assets);
    const started = process.hrtime.bigint();
    const result = await coalesce({
      pool,
      webhooks: routed,
      maxPayloadBytes: 16 * 1024 * 1024,
      logger: pino({ level: 'silent' }),
      features: ROUTING_FEATURES,
    });
    const rate = result.events / (Number(process.hrtime.bigint() - started) / 1e9);
    await clearResults(pool);
    return rate;
  };
  await run(mirror);
  await pool.query('vacuum analyze asset_webhooks.mirror_members');
  const mirrorRates: number[] = [];
  const plainRates: number[] = [];
  for (let repeat = 0; repeat < options.repeats; repeat += 1) {
    if (repeat % 2 === 0) {
      plainRates.push(await run(plain));
      mirrorRates.push(await run(mirror));
    } else {
      mirrorRates.push(await run(mirror));
      plainRates.push(await run(plain));
    }
  }
  const {
    rows: [size],
  } = await pool.query<{ bytes: string; members: string }>(
    `select pg_total_relation_size('asset_webhooks.mirror_members')::bigint as bytes,
            (select count(*) from asset_webhooks.mirror_members)::bigint as members`,
  );
  const members = Number(size!.members);
  await pool.query('truncate asset_webhooks.mirror_members');
  await pool.query('delete from asset_webhooks.webhooks');
  return {
    mirrorEventsPerSecond: measured(mirrorRates),
    plainEventsPerSecond: measured(plainRates),
    coalesceRatio: pairedRatio(mirrorRates, plainRates),
    bytesPerMember: members === 0 ? 0 : Number(size!.bytes) / members,
    members,
  };
}
