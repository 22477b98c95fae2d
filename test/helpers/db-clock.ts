import type pg from 'pg';
import { Completer } from '../../src/delivery/completer.js';
import type { DeliveryContext } from '../../src/delivery/context.js';
import { createPool } from '../../src/db/connect.js';

/**
 * The database URL whose sessions read asset_webhooks.now() `offsetMs` ahead
 * of the database's clock: the libpq option that sets
 * asset_webhooks.clock for every connection. The one way tests move
 * the time of a payload's lifecycle; they never sleep for it.
 */
export function urlAhead(url: string, offsetMs: number): string {
  const shifted = new URL(url);
  shifted.searchParams.set('options', `-c asset_webhooks.clock=${Math.round(offsetMs * 1000)}us`);
  return shifted.toString();
}

/**
 * The database URL whose sessions read asset_webhooks.now() stopped at `at`:
 * every decision is made at that exact instant, however slow the machine.
 */
export function urlStoppedAt(url: string, at: Date): string {
  const stopped = new URL(url);
  stopped.searchParams.set('options', `-c asset_webhooks.clock=${at.toISOString()}`);
  return stopped.toString();
}

/** Pools on urlAhead and urlStoppedAt, closed together. */
export class ClockPools {
  private readonly pools = new Map<number | string, pg.Pool>();

  constructor(private readonly url: string) {}

  /** A pool whose asset_webhooks.now() is `offsetMs` ahead. */
  ahead(offsetMs: number): pg.Pool {
    let pool = this.pools.get(offsetMs);
    if (!pool) {
      pool = createPool(urlAhead(this.url, offsetMs), { max: 2 });
      this.pools.set(offsetMs, pool);
    }
    return pool;
  }

  /** A pool whose asset_webhooks.now() is stopped at `at`. */
  at(at: Date): pg.Pool {
    const key = at.toISOString();
    let pool = this.pools.get(key);
    if (!pool) {
      pool = createPool(urlStoppedAt(this.url, at), { max: 2 });
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** `context` writing its results, one statement each, through a pool `offsetMs` ahead. */
  context(context: DeliveryContext, offsetMs: number): DeliveryContext {
    const pool = this.ahead(offsetMs);
    return { ...context, pool, completer: new Completer(pool) };
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.end()));
  }
}
