import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { databaseProxy } from '../helpers/database-proxy.js';
import { urlAhead } from '../helpers/db-clock.js';
import { oneEventBody } from '../helpers/payload-schema.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

const db = useTestDatabase();
const cleanup = useCleanup();

beforeEach(() => resetData(db.pool));

function writeConfig(yaml: string): string {
  const file = path.join(tempDirectory('aw-e2e-'), 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

function serviceConfig(url: string): string {
  return receiverConfig([{ id: 'crm', url, resourceTypes: ['Resource', 'Project'] }], {
    requestTimeoutSeconds: 5,
    retry: { delaysSeconds: [1, 1, 1] },
  });
}

/** Backends of the test's database running (or last having run) a tick, matching `where`. */
async function ticking(where: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid()
       and query like '%insert into asset_webhooks.ticks%' and ${where}`,
  );
  return rows[0]!.n;
}

function run(configFile: string, extraArgs: string[] = [], databaseUrl = db.url): CliProcess {
  const started = startCli(['run', '--database-url', databaseUrl, '--config', configFile, ...extraArgs], {
    env: {
      LOG_LEVEL: 'info',
    },
  });
  cleanup.process(started);
  return started;
}

interface Delivered {
  eventType: string;
  assetId: number;
  atomId: number | null;
  eventId: string;
}

function delivered(receiver: TestReceiver): Delivered[] {
  return receiver.requests.flatMap((r) => (JSON.parse(r.body) as { events: Delivered[] }).events);
}

describe('the service as operators run it', () => {
  it('delivers create, edit, version, trash, restore and purge through the reference schema', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    run(writeConfig(serviceConfig(receiver.url)));
    await db.pool.query('insert into assets (asset_id, latest_atom_id) values (1, 100)');
    await eventually(async () => (delivered(receiver).length >= 1 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'CREATED',
    });
    await db.pool.query("update assets set title = 'a' where asset_id = 1");
    await db.pool.query("update assets set title = 'b' where asset_id = 1");
    await db.pool.query(
      'insert into asset_atoms (asset_id) values (1); update assets set latest_atom_id = 101 where asset_id = 1',
    );
    await db.pool.query('update assets set trashed_at = now() where asset_id = 1');
    await db.pool.query('update assets set trashed_at = null where asset_id = 1');
    await eventually(async () => (delivered(receiver).some((e) => e.eventType === 'DELETED') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'DELETED',
    });
    await db.pool.query('delete from assets where asset_id = 1');
    await eventually(async () => (delivered(receiver).some((e) => e.eventType === 'PURGED') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'PURGED',
    });
    const types = delivered(receiver).map((e) => e.eventType);
    expect(types[0]).toBe('CREATED');
    expect(types.at(-1)).toBe('PURGED');
    expect(types).toContain('REVERSION');
    expect(delivered(receiver).find((e) => e.eventType === 'PURGED')!.atomId).toBeNull();
    expect(new Set(delivered(receiver).map((e) => e.eventId)).size).toBe(delivered(receiver).length);
  });

  it('exits 0 on SIGTERM during a slow delivery, with the payload delivered, not lost', async () => {
    const slow = await startTestReceiver();
    cleanup.close(slow);
    slow.respond = () => new Promise<number>((resolve) => setTimeout(() => resolve(200), 1500));
    const proc = run(writeConfig(serviceConfig(slow.url)));
    await db.pool.query('insert into assets (asset_id) values (1)');
    await slow.waitFor(1);
    proc.child.kill('SIGTERM');
    expect(await proc.exited).toBe(0);
    const { rows } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
    expect(rows).toEqual([{ status: 'delivered' }]);
  });

  it('delivers to its enabled webhooks after another run process with a different configuration has come and gone', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const first = run(writeConfig(serviceConfig(receiver.url)));
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    // A second process with an older document, without crm: at start it records
    // its webhooks, which disables crm for every process.
    const other = run(writeConfig(receiverConfig([{ id: 'shop', url: receiver.url }])));
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ enabled: boolean }>(
          "select enabled from asset_webhooks.webhooks where webhook_id = 'crm'",
        );
        return rows[0]?.enabled === false ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'crm disabled by the other process' },
    );
    other.child.kill('SIGTERM');
    expect(await other.exited).toBe(0);
    await db.pool.query('insert into assets (asset_id) values (2)');
    await eventually(async () => (delivered(receiver).some((e) => e.assetId === 2) ? true : undefined), {
      timeoutMs: 20_000,
      what: 'asset 2 delivered to crm',
    });
    // Restored: crm enabled again, shop (not in this process's document) disabled.
    expect(first.output.stderr).toMatch(
      /"webhooks":\["crm","shop"\].*asset_webhooks\.webhooks differed from this process's configuration/,
    );
  });

  it('does not die of a SIGHUP that arrives while the command line is still loading its modules', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const configFile = writeConfig(serviceConfig(receiver.url));
    // A module loader hook (a test's own, through NODE_OPTIONS) holds the
    // loading of dist/cli/main.js until a file appears: the signal then lands
    // after the entry point started buffering and before `run` has handlers.
    const directory = tempDirectory('aw-early-');
    const release = path.join(directory, 'release');
    const signalled = path.join(directory, 'signalled');
    const hooks = path.join(directory, 'hooks.mjs');
    writeFileSync(
      hooks,
      `import { existsSync, writeSync } from 'node:fs';
export async function load(url, context, nextLoad) {
  if (url.endsWith('/dist/cli/main.js')) {
    writeSync(2, 'loading held\\n');
    let told = false;
    while (!existsSync(${JSON.stringify(release)})) {
      if (!told && existsSync(${JSON.stringify(signalled)})) {
        told = true;
        writeSync(2, 'saw the file written after the signal\\n');
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  return nextLoad(url, context);
}
`,
    );
    const register = path.join(directory, 'register.mjs');
    writeFileSync(
      register,
      `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
    );
    const held = startCli(['run', '--database-url', db.url, '--config', configFile], {
      env: {
        LOG_LEVEL: 'info',
        NODE_OPTIONS: `--import ${pathToFileURL(register).href}`,
      },
    });
    cleanup.process(held);
    await eventually(async () => (held.output.stderr.includes('loading held') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the loading of main.js to be held',
    });
    held.child.kill('SIGHUP');
    // The signal arrives while main.js is still loading, before anything could say it was taken.
    // Linux ends a process for a fatal signal before kill() returns to the sender: a process that
    // reads a file written after it, and says so, outlived the signal; Node's default would not have.
    writeFileSync(signalled, '');
    await eventually(
      async () => {
        if (held.child.exitCode !== null || held.child.signalCode !== null)
          throw new Error(
            `ended by the signal (${held.child.signalCode ?? held.child.exitCode}): ${held.output.stderr}`,
          );
        return held.output.stderr.includes('saw the file written after the signal') ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the held loader to see a file written after the signal' },
    );
    expect(held.child.exitCode, held.output.stderr).toBeNull();
    expect(held.child.signalCode).toBeNull();
    writeFileSync(release, '');
    await eventually(async () => (held.output.stderr.includes('configuration reloaded') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the held SIGHUP applied once up',
    });
    held.child.kill('SIGTERM');
    expect(await held.exited, held.output.stderr).toBe(0);
  });

  it("sends a pending payload that nothing announced (a lost wake-up): the delivery pump's poll finds it", async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    run(writeConfig(serviceConfig(receiver.url)));
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1, 20_000);
    // Once that delivery has settled, and away from a minute boundary (maintenance):
    // nothing but the pump's poll is left to find the next payload.
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "select (select count(*) from asset_webhooks.payloads where status <> 'delivered') + (select count(*) from asset_webhooks.in_flight) as n",
        );
        return rows[0]!.n === 0 ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the first payload to be settled' },
    );
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ second: number }>(
          'select extract(second from clock_timestamp())::float8 as second',
        );
        return rows[0]!.second < 40 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'a moment away from the minute boundary' },
    );
    // Waiting, and no NOTIFY: as a payload whose wake-up was lost is left.
    const body = oneEventBody();
    await db.pool.query(
      `insert into asset_webhooks.payloads (webhook_id, status, body, byte_size, event_count, event_ids)
       values ('crm', 'pending', $1, length($1), 1, '{}')`,
      [body],
    );
    await receiver.waitFor(2, 10_000);
    expect(receiver.requests[1]!.body).toBe(body);
  });

  it('takes SIGHUP and SIGTERM during start-up: the reload is applied once it is up, the stop exits 0', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const configFile = writeConfig(serviceConfig(receiver.url));
    // The database answers nothing until up(): start-up waits in its first query.
    const proxy = await databaseProxy(new URL(db.url));
    try {
      proxy.hold();
      const reloaded = startCli(['run', '--database-url', proxy.url, '--config', configFile], {
        env: { LOG_LEVEL: 'info' },
      });
      cleanup.process(reloaded);
      await eventually(async () => (proxy.accepted > 0 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'start-up reached the database',
      });
      reloaded.child.kill('SIGHUP');
      await eventually(
        async () => (reloaded.output.stderr.includes('reloading as soon as start-up completes') ? true : undefined),
        { timeoutMs: 10_000, what: 'the SIGHUP during start-up to be taken' },
      );
      expect(reloaded.child.exitCode, reloaded.output.stderr).toBeNull();
      expect(reloaded.child.signalCode).toBeNull();
      proxy.up();
      await eventually(async () => (reloaded.output.stderr.includes('configuration reloaded') ? true : undefined), {
        timeoutMs: 20_000,
        what: 'reloaded after start-up',
      });
      await db.pool.query('insert into assets (asset_id) values (1)');
      await receiver.waitFor(1);
      // Gone before the next process starts: only that one's start-up may count as reaching the database.
      reloaded.child.kill('SIGTERM');
      expect(await reloaded.exited, reloaded.output.stderr).toBe(0);

      proxy.hold();
      const accepted = proxy.accepted;
      const stopped = startCli(['run', '--database-url', proxy.url, '--config', configFile], {
        env: { LOG_LEVEL: 'info' },
      });
      cleanup.process(stopped);
      await eventually(async () => (proxy.accepted > accepted ? true : undefined), {
        timeoutMs: 20_000,
        what: 'start-up reached the database',
      });
      stopped.child.kill('SIGTERM');
      await eventually(
        async () => (stopped.output.stderr.includes('stopping as soon as start-up completes') ? true : undefined),
        { timeoutMs: 10_000, what: 'the SIGTERM during start-up to be taken' },
      );
      proxy.up();
      expect(await stopped.exited, stopped.output.stderr).toBe(0);
      expect(stopped.output.stderr).toMatch(/"signal":"SIGTERM".*"msg":"signal received"/);

      // A database that never answers: the second Ctrl-C ends the wait.
      proxy.hold();
      const acceptedBefore = proxy.accepted;
      const hung = startCli(['run', '--database-url', proxy.url, '--config', configFile], {
        env: { LOG_LEVEL: 'info' },
      });
      cleanup.process(hung);
      await eventually(async () => (proxy.accepted > acceptedBefore ? true : undefined), {
        timeoutMs: 20_000,
        what: 'start-up reached the database',
      });
      hung.child.kill('SIGINT');
      await eventually(
        async () => (hung.output.stderr.includes('stopping as soon as start-up completes') ? true : undefined),
        { timeoutMs: 10_000, what: 'the first SIGINT during start-up to be taken' },
      );
      expect(hung.child.exitCode).toBeNull();
      expect(hung.child.signalCode).toBeNull();
      hung.child.kill('SIGINT');
      expect(await hung.exited, hung.output.stderr).toBe(130);
      expect(hung.output.stderr).toMatch(/second signal during start-up: exiting now/);
    } finally {
      await proxy.close();
    }
  });

  it('keeps running on the old configuration after SIGHUP with a broken document', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const file = writeConfig(serviceConfig(receiver.url));
    const proc = run(file);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    writeFileSync(file, 'assetUpdater:\n  webhooks: [ { url: 12 } ]\n');
    proc.child.kill('SIGHUP');
    await eventually(async () => (proc.output.stderr.includes('configuration not reloaded') ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the reload error',
    });
    await db.pool.query('insert into assets (asset_id) values (2)');
    await receiver.waitFor(2);
    expect(proc.child.exitCode).toBeNull();
  });

  it('applies an intervalSeconds changed by SIGHUP without a restart', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const hourly = receiverConfig([{ id: 'crm', url: receiver.url }], { intervalSeconds: 3600 });
    const file = writeConfig(hourly);
    // The service's clock (asset_webhooks.now()) set to half past an hour, so
    // that no hour begins while the test waits, whatever the wall clock says.
    const halfPast = (Math.floor(Date.now() / 3_600_000) + 1.5) * 3_600_000;
    const proc = run(file, [], urlAhead(db.url, halfPast - Date.now()));
    await eventually(async () => (proc.output.stderr.includes('asset-webhooks running') ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the service to start',
    });
    await db.pool.query('insert into assets (asset_id) values (1)');
    // Started mid-hour, the service waits for the next whole hour: no run yet. A tick of its ticker
    // (every second) is held on a lock of asset_webhooks.ticks, then let go: once it has run, it has
    // decided, after the insert, that no interval is due.
    const blocker = await db.pool.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table asset_webhooks.ticks in share mode');
      await eventually(async () => ((await ticking("wait_event_type = 'Lock'")) > 0 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'a tick waiting on the lock',
      });
      await blocker.query('commit');
    } finally {
      blocker.release();
    }
    await eventually(async () => ((await ticking("state <> 'idle'")) === 0 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'the tick to end',
    });
    // Ticks of this service are stamped by its clock, from half past on; earlier tests' by the wall clock.
    const { rows: ticks } = await db.pool.query<{ n: number }>(
      'select count(*)::int as n from asset_webhooks.ticks where created_at >= to_timestamp($1::float8 / 1000)',
      [halfPast],
    );
    expect(ticks).toEqual([{ n: 0 }]);
    const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.coalesce_runs');
    expect(rows).toEqual([{ n: 0 }]);
    expect(receiver.requests).toHaveLength(0);
    writeFileSync(file, receiverConfig([{ id: 'crm', url: receiver.url }], { intervalSeconds: 1 }));
    proc.child.kill('SIGHUP');
    await receiver.waitFor(1, 10_000);
    expect(proc.output.stderr).toMatch(
      /configuration reloaded.*"intervalSeconds":1|"intervalSeconds":1.*configuration reloaded/,
    );
    expect(delivered(receiver).map((e) => [e.eventType, e.assetId])).toEqual([['CREATED', 1]]);
  });

  it('serves /metrics in Prometheus format that moves with deliveries, and /healthz', async () => {
    const receiver = await startTestReceiver();
    cleanup.close(receiver);
    const port = await freePort();
    run(writeConfig(serviceConfig(receiver.url)), ['--http-port', String(port)]);
    const health = await eventually(
      async () => {
        try {
          const response = await fetch(`http://127.0.0.1:${port}/healthz`);
          return response.status === 200 ? await response.json() : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 20_000, what: '/healthz' },
    );
    expect(health).toEqual({ status: 'ok' });
    await db.pool.query('truncate asset_webhooks.capture_errors');
    await db.pool.query(
      "select asset_webhooks.record_capture_error('asset_keywords', 'DELETE', '23514', 'a check refused the row')",
    );
    await db.pool.query('insert into assets (asset_id) values (1)');
    await receiver.waitFor(1);
    const text = await eventually(
      async () => {
        const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return /asset_webhooks_delivery_attempts_total\{webhook="crm",outcome="delivered"\} 1/.test(body)
          ? body
          : undefined;
      },
      { timeoutMs: 10_000, what: 'the delivery to show in /metrics' },
    );
    expect(text).toMatch(/# TYPE asset_webhooks_events_coalesced_total counter/);
    expect(text).toMatch(/asset_webhooks_outbox_backlog_rows \d+/);
    expect(text).toMatch(/\nasset_webhooks_oldest_transaction_age_seconds \d/);
    expect(text).toMatch(/\nasset_webhooks_capture_errors\{table="asset_keywords",operation="DELETE"\} 1\n/);
    expect(text).not.toContain('a check refused the row');
    expect(text).toMatch(/\nasset_webhooks_capture_gaps 0\n/);
    // A trigger disabled while the service runs (a restore, say) shows within
    // an interval: values read from the database are refreshed once per interval.
    await db.pool.query('alter table public.asset_keywords disable trigger asset_webhooks_capture_insert');
    try {
      await eventually(
        async () =>
          /\nasset_webhooks_capture_gaps 1\n/.test(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())
            ? true
            : undefined,
        { timeoutMs: 5_000, what: 'the disabled trigger to show in /metrics' },
      );
    } finally {
      await db.pool.query('alter table public.asset_keywords enable always trigger asset_webhooks_capture_insert');
    }
    expect(text).not.toContain(receiver.url);
  });

  it('refuses to start on an invalid configuration, naming the field (exit 1)', async () => {
    const result = await runCli([
      'run',
      '--database-url',
      db.url,
      '--config',
      writeConfig('assetUpdater:\n  webhooks:\n    - { url: "ftp://x", enabled: true }\n'),
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/assetUpdater\.webhooks\[0\]\.url/);
  });

  it('refuses to start on an unreachable database with one line (exit 1)', async () => {
    const result = await runCli([
      'run',
      '--database-url',
      'postgres://postgres@127.0.0.1:1/none',
      '--config',
      writeConfig(serviceConfig('http://127.0.0.1:9/x')),
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/expected a reachable PostgreSQL server/);
  });

  it('refuses an --http-port already in use with one line (exit 1), before any work starts', async () => {
    const port = await freePort();
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(port, '0.0.0.0', resolve));
    try {
      await db.pool.query('insert into assets (asset_id) values (1)');
      const result = await runCli(
        [
          'run',
          '--database-url',
          db.url,
          '--config',
          writeConfig(serviceConfig('http://127.0.0.1:9/x')),
          '--http-port',
          String(port),
        ],
        { env: {}, timeoutMs: 20_000 },
      );
      expect(result.code).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(
          new RegExp(`^--http-port ${port}: expected a port this process can listen on, got .*EADDRINUSE`),
        ),
      ]);
      const { rows } = await db.pool.query<{ n: number }>('select count(*)::int as n from asset_webhooks.outbox');
      expect(rows).toEqual([{ n: 1 }]);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('prints usage errors with exit 2', async () => {
    const result = await runCli(['run', '--http-port', 'abc']);
    expect(result.code).toBe(2);
  });

  it("migrate behind a coalescing run's snapshot lets the application write meanwhile, and finishes after it", async () => {
    // A run holds light locks on the asset tables and the binding's view for its duration.
    const run = await db.pool.connect();
    try {
      await run.query('begin isolation level repeatable read');
      await run.query('select count(*) from asset_webhooks.asset_state');
      const migrating = runCli(['migrate', '--binding', 'reference', '--database-url', db.url], {
        env: {},
        timeoutMs: 60_000,
      });
      await eventually(
        async () => {
          const { rows } = await db.pool.query<{ n: number }>(
            "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
          );
          return (rows[0]?.n ?? 0) > 0 ? true : undefined;
        },
        { timeoutMs: 20_000, what: 'migrate waiting for its lock' },
      );
      // Without short lock tries this insert queued behind migrate until the run ended.
      const writer = await db.pool.connect();
      try {
        await writer.query("set statement_timeout = '10s'");
        await writer.query('insert into assets (asset_id) values (77)');
      } finally {
        writer.release();
      }
      await run.query('commit');
      const result = await migrating;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain('migrate: waiting for locks held by a coalescing run or another session');
    } finally {
      await run.query('rollback').catch(() => {});
      run.release();
    }
  });

  it('migrate: idempotent, concurrent, and clear about a bad binding file', async () => {
    const [a, b] = await Promise.all([
      runCli(['migrate', '--database-url', db.url, '--binding', 'reference']),
      runCli(['migrate', '--database-url', db.url, '--binding', 'reference']),
    ]);
    expect([a.code, b.code]).toEqual([0, 0]);
    const bad = await runCli(['migrate', '--database-url', db.url, '--binding', '/nonexistent/binding.sql']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^--binding: expected "reference" or a readable SQL file, got "\/nonexistent\/binding.sql"/,
    );
  });
});
