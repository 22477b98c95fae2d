import { afterEach, describe, expect, it } from 'vitest';
import { announcePayloadsReady, SCHEMA_CHANGED_CHANNEL } from '../../src/db/payloads-ready.js';
import { listenForPayloads, type PayloadsListener } from '../../src/delivery/payloads-listener.js';
import { databaseProxy } from '../helpers/database-proxy.js';
import { eventually } from '../helpers/receiver.js';
import { silentLogger } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// The delivery pump's wake-up call (src/delivery/payloads-listener.ts), against the real server.

const db = useTestDatabase();
let listeners: PayloadsListener[] = [];

afterEach(async () => {
  await Promise.all(listeners.map((listener) => listener.close()));
  listeners = [];
});

/** A listener under a name of its own, counting its calls. */
function start(name: string): { calls: () => number } {
  let calls = 0;
  listeners.push(
    listenForPayloads(
      { databaseUrl: db.url, logger: silentLogger, applicationName: name, retryMs: 50, maxRetryMs: 200 },
      () => (calls += 1),
    ),
  );
  return { calls: () => calls };
}

async function backends(name: string): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = $1',
    [name],
  );
  return rows.map((row) => row.pid);
}

/** Ends the backend of the listener named `name`. */
async function terminate(name: string): Promise<void> {
  const pids = await backends(name);
  expect(pids).toHaveLength(1);
  await db.pool.query('select pg_terminate_backend($1)', [pids[0]]);
}

/** Waits until `calls` has passed `count`. */
async function calledPast(calls: () => number, count: number, what: string): Promise<number> {
  return eventually(async () => (calls() > count ? calls() : undefined), { timeoutMs: 10_000, what });
}

describe('payloads-ready listener', () => {
  it("calls another channel's callback on the same connection, and not the payloads' one", async () => {
    let payloads = 0;
    let schema = 0;
    listeners.push(
      listenForPayloads(
        {
          databaseUrl: db.url,
          logger: silentLogger,
          applicationName: 'listener-also',
          also: { [SCHEMA_CHANGED_CHANNEL]: () => (schema += 1) },
        },
        () => (payloads += 1),
      ),
    );
    await calledPast(() => payloads, 0, 'the call that follows LISTEN');
    await db.pool.query("select pg_notify($1, '')", [SCHEMA_CHANGED_CHANNEL]);
    await calledPast(() => schema, 0, 'the schema notification');
    expect({ payloads, schema }).toEqual({ payloads: 1, schema: 1 });
    expect(await backends('listener-also')).toHaveLength(1);
  });

  it('is called once it listens, and again for each NOTIFY on the payloads-ready channel', async () => {
    const listener = start('listener-notify');
    const first = await calledPast(listener.calls, 0, 'the call that follows LISTEN');
    expect(first).toBe(1);
    await announcePayloadsReady(db.pool);
    await calledPast(listener.calls, 1, 'the first notification');
    await announcePayloadsReady(db.pool);
    await calledPast(listener.calls, 2, 'the second notification');
    // Another channel is not this one's: a connection's notifications arrive in the order they were
    // committed, so once the next payloads-ready one has called, the other channel's would have too.
    await db.pool.query("select pg_notify('some_other_channel', '')");
    await announcePayloadsReady(db.pool);
    await calledPast(listener.calls, 3, 'the notification after the other channel');
    expect(listener.calls()).toBe(4);
  });

  it('listens again on a new connection after its backend is terminated', async () => {
    const name = 'listener-terminated';
    const listener = start(name);
    await calledPast(listener.calls, 0, 'the call that follows LISTEN');
    const [pid] = await backends(name);
    expect(pid).toBeDefined();
    await db.pool.query('select pg_terminate_backend($1)', [pid]);
    // Listening again, it is called once for what may have been committed meanwhile.
    await calledPast(listener.calls, 1, 'the call that follows LISTEN again');
    const again = await backends(name);
    expect(again).toHaveLength(1);
    expect(again[0]).not.toBe(pid);
    const before = listener.calls();
    await announcePayloadsReady(db.pool);
    await calledPast(listener.calls, before, 'a notification on the new connection');
  });

  it('closes its connection and listens no more once closed', async () => {
    const name = 'listener-closed';
    const listener = start(name);
    await calledPast(listener.calls, 0, 'the call that follows LISTEN');
    expect(await backends(name)).toHaveLength(1);
    await listeners.pop()!.close();
    await eventually(async () => ((await backends(name)).length === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'no backend',
    });
    const before = listener.calls();
    // A listener like it, its connection ended after this one's close: once it
    // has listened again and heard the next notification, this one, had it
    // reconnected, would have been called.
    const control = start(`${name}-control`);
    await calledPast(control.calls, 0, "the control's call that follows LISTEN");
    await terminate(`${name}-control`);
    await calledPast(control.calls, 1, 'the control listening again');
    await announcePayloadsReady(db.pool);
    await calledPast(control.calls, 2, "the control's notification");
    expect(listener.calls()).toBe(before);
    expect(await backends(name)).toEqual([]);
  });

  it('closes when the server no longer answers: the socket is dropped once the goodbye goes unanswered', async () => {
    const proxy = await databaseProxy(new URL(db.url));
    try {
      let calls = 0;
      const listener = listenForPayloads(
        { databaseUrl: proxy.url, logger: silentLogger, applicationName: 'listener-silenced', closeWaitMs: 200 },
        () => (calls += 1),
      );
      // A listener with the same pause before reconnecting, straight to the server.
      let controlCalls = 0;
      listeners.push(
        listenForPayloads(
          { databaseUrl: db.url, logger: silentLogger, applicationName: 'listener-silenced-control' },
          () => (controlCalls += 1),
        ),
      );
      await calledPast(() => calls, 0, 'the call that follows LISTEN');
      await calledPast(() => controlCalls, 0, "the control's call that follows LISTEN");
      // The connection's server side is gone and its client side hears nothing: pg's own end() would wait forever.
      proxy.silence();
      await listener.close();
      // Closed means closed: no reconnection follows. The control's connection
      // ends after this close; once it listens again, this one would have too.
      await terminate('listener-silenced-control');
      await calledPast(() => controlCalls, 1, 'the control listening again');
      expect(calls).toBe(1);
      expect(await backends('listener-silenced')).toEqual([]);
      expect(proxy.accepted).toBe(1);
    } finally {
      await proxy.close();
    }
  }, 15_000);
});
