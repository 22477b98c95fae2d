import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * The port `run --http-port` serves is open to whatever can reach it: floods
 * of scrapes and probes, and connections that never send a byte. None of it
 * may reach the database or take the file descriptors deliveries need.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

/** Statements only the service's /metrics values and its readiness check send. */
const METRICS_READ = 'from asset_webhooks.capture_errors group by';
const READINESS_CHECK = 'from asset_webhooks.ticks where finished_at is not null';

/**
 * A TCP proxy to the test database that counts, in what clients send, the
 * statements containing each marker (a statement's text is sent whole, though
 * it may be split across reads: each connection keeps the tail of its last read).
 */
async function countingProxy(markers: readonly string[]): Promise<{
  url: string;
  count(marker: string): number;
  close(): Promise<void>;
}> {
  const target = new URL(db.url);
  const counts = new Map(markers.map((marker) => [marker, 0]));
  const longest = Math.max(...markers.map((marker) => marker.length));
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    let tail = '';
    client.on('data', (chunk: Buffer) => {
      const text = tail + chunk.toString('latin1');
      for (const marker of markers) {
        let at = text.indexOf(marker);
        while (at !== -1) {
          // A marker wholly inside the kept tail was counted with the previous read.
          if (at + marker.length > tail.length) counts.set(marker, counts.get(marker)! + 1);
          at = text.indexOf(marker, at + 1);
        }
      }
      tail = text.slice(-(longest - 1));
    });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const url = new URL(db.url);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    count: (marker) => counts.get(marker)!,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

function configFile(receiver: TestReceiver, intervalSeconds = 1): string {
  const file = path.join(tempDirectory('aw-probe-port-'), 'config.yaml');
  writeFileSync(file, receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 1 }], { intervalSeconds }));
  return file;
}

/** Inserts `count` assets from `first` on and waits until each one's CREATED has arrived, exactly once. */
async function deliverAssets(receiver: TestReceiver, first: number, count: number, timeoutMs: number): Promise<void> {
  await db.pool.query('insert into assets (asset_id) select g from generate_series($1::int, $2::int) g', [
    first,
    first + count - 1,
  ]);
  const delivered = (): number[] =>
    receiver.requests.flatMap((request) =>
      (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events
        .map((event) => event.assetId)
        .filter((id) => id >= first && id < first + count),
    );
  await eventually(async () => (delivered().length >= count ? true : undefined), {
    timeoutMs,
    what: `${count} assets delivered`,
  });
  expect(delivered().sort((a, b) => a - b)).toEqual(Array.from({ length: count }, (_, i) => first + i));
}

/**
 * Every attempt ended delivered, and every payload is delivered. A receiver has the body before its
 * result is written (results are written in batches), so this first waits until no attempt is open.
 */
async function nothingFailed(): Promise<void> {
  await eventually(
    async () => {
      const open = await db.pool.query('select 1 from asset_webhooks.attempts where outcome is null limit 1');
      return open.rowCount === 0 ? true : undefined;
    },
    { timeoutMs: 10_000, what: 'every attempt settled' },
  );
  const { rows } = await db.pool.query<{ dead: number; failed: number; undelivered: number }>(
    `select (select count(*)::int from asset_webhooks.payloads where status = 'dead_lettered') as dead,
            (select count(*)::int from asset_webhooks.attempts where outcome is distinct from 'delivered') as failed,
            (select count(*)::int from asset_webhooks.payloads where status <> 'delivered') as undelivered`,
  );
  expect(rows[0]).toEqual({ dead: 0, failed: 0, undelivered: 0 });
}

/** Opens `count` TCP connections to the port that send nothing; resolves once each is connected or refused. */
async function idleSockets(port: number, count: number): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.on('error', () => {});
          // Read (and drop) whatever arrives, so that the server's close is seen.
          socket.resume();
          socket.once('connect', () => resolve(socket));
          socket.once('close', () => resolve(socket));
        }),
    ),
  );
}

const openCount = (sockets: readonly Socket[]): number =>
  sockets.filter((socket) => !socket.destroyed && socket.readyState === 'open').length;

it(
  'a flood of /metrics and /readyz requests while deliveries run reaches the database once per interval, and delivery goes on',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    const proxy = await countingProxy([METRICS_READ, READINESS_CHECK]);
    const port = await freePort();
    const intervalSeconds = 2;
    const run = startRun({
      databaseUrl: proxy.url,
      configFile: configFile(receiver, intervalSeconds),
      httpPort: port,
      httpHost: '127.0.0.1',
    });
    try {
      await untilRunning(run);
      await deliverAssets(receiver, 1, 10, 30_000);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(200);

      const metricsReadsBefore = proxy.count(METRICS_READ);
      const readinessChecksBefore = proxy.count(READINESS_CHECK);
      const started = performance.now();
      const floodMs = 6_000;
      // Answers by path and status ("/metrics 200": count).
      const answers = new Map<string, number>();
      const flood = Array.from({ length: 8 }, async (_, lane) => {
        for (let i = 0; performance.now() - started < floodMs && i < 5_000; i++) {
          const path = (i + lane) % 2 === 0 ? '/metrics' : '/readyz';
          const response = await fetch(`http://127.0.0.1:${port}${path}`);
          await response.arrayBuffer();
          const key = `${path} ${response.status}`;
          answers.set(key, (answers.get(key) ?? 0) + 1);
        }
      });
      // Deliveries go on during the flood: the events of assets created meanwhile all arrive once.
      await deliverAssets(receiver, 11, 20, 30_000);
      await Promise.all(flood);
      const seconds = (performance.now() - started) / 1000;
      const requests = [...answers.values()].reduce((a, b) => a + b, 0);
      const metricsReads = proxy.count(METRICS_READ) - metricsReadsBefore;
      const readinessChecks = proxy.count(READINESS_CHECK) - readinessChecksBefore;

      // Every scrape is answered; readiness may say 503 on a machine so loaded that a check takes over 2 s.
      const metricsAnswered = [...answers].filter(([key]) => key.startsWith('/metrics ')).map(([, n]) => n);
      expect(answers.get('/metrics 200'), JSON.stringify([...answers])).toBe(
        metricsAnswered.reduce((a, b) => a + b, 0),
      );
      expect(answers.get('/readyz 200'), JSON.stringify([...answers])).toBeGreaterThan(0);
      expect(requests).toBeGreaterThan(200);
      // At most one read of the database's values per interval, and one readiness check per second.
      expect(metricsReads, `${requests} requests in ${seconds}s`).toBeLessThanOrEqual(
        Math.ceil(seconds / intervalSeconds) + 1,
      );
      expect(readinessChecks, `${requests} requests in ${seconds}s`).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
      await nothingFailed();
    } finally {
      await stopRun(run);
      await proxy.close();
      await receiver.close();
    }
  },
);

it(
  'connections to the port are capped, and the idle ones are closed within seconds; the port answers again afterwards',
  { timeout: 90_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    const port = await freePort();
    const run = startRun({ databaseUrl: db.url, configFile: configFile(receiver), httpPort: port });
    const sockets: Socket[] = [];
    try {
      await untilRunning(run);
      sockets.push(...(await idleSockets(port, 300)));
      // Connections above the cap are closed as soon as they are accepted.
      const held = await eventually(
        async () => {
          const open = openCount(sockets);
          return open <= 64 ? open : undefined;
        },
        { timeoutMs: 10_000, what: 'the connections above the cap closed' },
      );
      expect(held).toBeGreaterThan(0);
      expect(held).toBeLessThanOrEqual(64);
      // The others are closed once the header timeout has passed without a request.
      await eventually(async () => (openCount(sockets) === 0 ? true : undefined), {
        timeoutMs: 15_000,
        what: 'every idle connection closed',
      });
      // A connection left idle after a request is closed too (keep-alive timeout).
      const kept = await idleSockets(port, 1);
      const answered = once(kept[0]!, 'data');
      kept[0]!.write('GET /livez HTTP/1.1\r\nhost: x\r\n\r\n');
      await answered;
      expect(openCount(kept)).toBe(1);
      await eventually(async () => (openCount(kept) === 0 ? true : undefined), {
        timeoutMs: 15_000,
        what: 'the kept-alive connection closed',
      });
      expect((await fetch(`http://127.0.0.1:${port}/livez`)).status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
      await stopRun(run);
      await receiver.close();
    }
  },
);

it(
  'under a low limit of file descriptors, hundreds of connections held open on the port leave deliveries unharmed',
  { timeout: 120_000 },
  async () => {
    await resetData(db.pool);
    const receiver = await startTestReceiver();
    const port = await freePort();
    const run = startRun({ databaseUrl: db.url, configFile: configFile(receiver), httpPort: port, fileLimit: 300 });
    // An attacker that keeps 400 connections open: each one closed is opened again a second later.
    let attacking = true;
    const sockets = new Set<Socket>();
    let closed = 0;
    const attack = (): void => {
      if (!attacking) return;
      const socket = connect(port, '127.0.0.1');
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('close', () => {
        closed += 1;
        sockets.delete(socket);
        setTimeout(attack, 1_000).unref();
      });
    };
    try {
      await untilRunning(run);
      for (let i = 0; i < 400; i++) attack();
      // Under way once the service has had to turn connections away.
      await eventually(async () => (closed > 0 ? true : undefined), {
        timeoutMs: 10_000,
        what: 'the service to close connections of the attack',
      });
      await deliverAssets(receiver, 1, 40, 60_000);
      await nothingFailed();
      expect(run.child.exitCode).toBeNull();
    } finally {
      attacking = false;
      for (const socket of sockets) socket.destroy();
      await stopRun(run);
      await receiver.close();
    }
  },
);
