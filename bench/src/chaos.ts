import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import type pg from 'pg';
import { isConnectionError } from '../../src/db/connect.js';
import { migrate } from '../../src/migrate/migrate.js';
import { startRestartablePostgres, type RestartablePostgres } from '../../test/helpers/restartable-postgres.js';
import { compareCapture, judgeRun, type OutcomeRow, type Receipt } from './chaos-judge.js';
import { readLedger } from './ledger.js';
import { applicationPool } from './application-pool.js';

// Resolved from the compiled file, dist-bench/bench/src/chaos.js, to the repository's CLI and results.
const cli = fileURLToPath(new URL('../../../bin/asset-webhooks.js', import.meta.url));
const resultsDirectory = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

const log = (line: string): void => void process.stderr.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface ChaosOptions {
  readonly changes: number;
  readonly seconds: number;
  readonly crashes: number;
  readonly kills: number;
  readonly seed: number;
  readonly requestTimeoutSeconds?: number;
  readonly json: boolean;
}

/**
 * `npm run chaos [-- --json]`: recovery after crashes, measured as a whole.
 * A PostgreSQL server of its own, two real `run` processes and a receiver
 * that records every event id; asset changes committed at a steady rate for
 * about a minute while the server is crashed (`pg_ctl stop -m immediate`,
 * then started) and the run processes are SIGKILLed and started again. Then
 * the time from the last change to the moment every captured event has ended,
 * and the verdict: every event reached every webhook it should, none was
 * lost, and which were received twice (allowed only for a payload in flight
 * when its process was killed).
 */
export async function chaosMain(argv: readonly string[]): Promise<void> {
  const opts = new Command('chaos')
    .option('--chaos', 'this run (the flag that chose it)')
    .option('--changes <n>', 'asset changes to commit', '10700')
    .option('--seconds <n>', 'over about this many seconds', '60')
    .option('--crashes <n>', 'immediate-mode server crashes while changes are committed', '3')
    .option('--kills <n>', 'SIGKILLs of a run process while changes are committed', '5')
    .option('--seed <n>', 'seed of the changes chosen', '1')
    .option('--request-timeout <seconds>', "the webhooks' requestTimeoutSeconds (default: the service's)")
    .option('--json', 'print the summary as one JSON object on the last line')
    .parse([...argv])
    .opts<Record<string, string | boolean | undefined>>();
  const options: ChaosOptions = {
    changes: Number(opts.changes),
    seconds: Number(opts.seconds),
    crashes: Number(opts.crashes),
    kills: Number(opts.kills),
    seed: Number(opts.seed),
    ...(opts.requestTimeout === undefined ? {} : { requestTimeoutSeconds: Number(opts.requestTimeout) }),
    json: opts.json === true,
  };

  const work = mkdtempSync(path.join(os.tmpdir(), 'aw-chaos-'));
  const server = await startRestartablePostgres();
  const pool = applicationPool(server.tcpUrl, { max: 6, applicationName: 'asset-webhooks chaos' });
  const receiver = await startRecordingReceiver({ slow: { webhookId: 'slow', delayMs: 250 } });
  const runs: RunSlot[] = [];
  try {
    await migrate(pool, { binding: 'reference' });
    const seeded = await seedAssets(pool, 2000);
    const configPath = path.join(work, 'config.yaml');
    writeFileSync(configPath, chaosConfig(receiver.url, options.requestTimeoutSeconds));
    for (let slot = 0; slot < 2; slot += 1) runs.push(new RunSlot(slot, server.tcpUrl, configPath, work));
    for (const run of runs) run.start();
    await waitFor(async () => {
      const { rows } = await pool.query<{ n: number }>(
        'select count(*)::int as n from asset_webhooks.webhooks where enabled',
      );
      return rows[0]!.n === WEBHOOKS.length;
    }, 60_000);
    log(
      `chaos: ${options.changes} changes over ${options.seconds}s, ${options.crashes} server crashes, ${options.kills} run-process kills; logs in ${work}`,
    );

    const started = Date.now();
    const timeline: Timeline = [];
    const writer = new ChangeWriter(pool, seeded, options.seed);
    const writing = writer.write(options.changes, options.seconds * 1000, started);
    const disrupting = disrupt(pool, server, runs, options, started, timeline);
    await Promise.all([writing, disrupting]);
    const lastChangeAt = writer.lastCommitAt;
    log(
      `chaos: ${writer.committed.length} changes committed in ${((lastChangeAt - started) / 1000).toFixed(1)}s; waiting for every event to end...`,
    );

    const settled = await waitUntilSettled(pool, 900_000);
    const sawSettledAt = Date.now();
    // Every run process is stopped before the verdict, so nothing moves while it is read.
    for (const run of runs) await run.stop();
    await receiver.close();

    const { rows: ends } = await pool.query<{ settled_ms: number | null }>(
      `select extract(epoch from greatest(
         (select max(delivered_at) from asset_webhooks.payloads),
         (select max(dead_lettered_at) from asset_webhooks.payloads),
         (select max(coalesced_at) from asset_webhooks.events))) * 1000 as settled_ms`,
    );
    const settledAt = Number(ends[0]!.settled_ms);
    const { rows: outcomeRows } = await pool.query<{
      event_id: string;
      webhook_id: string;
      outcome: string;
      excluded_by: string | null;
      payload_id: number | null;
      collapsed_into: string | null;
    }>(
      'select event_id, webhook_id, outcome, excluded_by, payload_id, collapsed_into from asset_webhooks.event_outcomes',
    );
    const outcomes: OutcomeRow[] = outcomeRows.map((r) => ({
      eventId: r.event_id,
      webhookId: r.webhook_id,
      outcome: r.outcome,
      excludedBy: r.excluded_by,
      payloadId: r.payload_id === null ? null : Number(r.payload_id),
      collapsedInto: r.collapsed_into,
    }));
    const duplicatedPayloads = duplicatedPayloadIds(outcomes, receiver.receipts);
    const { rows: payloadRows } = await pool.query<{ payload_id: number; event_ids: string[] }>(
      'select payload_id, event_ids::text[] as event_ids from asset_webhooks.payloads where payload_id = any($1)',
      [duplicatedPayloads],
    );
    const judgement = judgeRun(
      outcomes,
      receiver.receipts,
      new Map(payloadRows.map((r) => [Number(r.payload_id), r.event_ids])),
    );
    const { rows: attemptRows } = await pool.query<{ payload_id: number; attempts: number; interrupted: boolean }>(
      `select payload_id, count(*)::int as attempts, bool_or(error_class = 'interrupted') as interrupted
       from asset_webhooks.attempts where payload_id = any($1) group by payload_id`,
      [duplicatedPayloads],
    );
    const interruptedPayloads = new Set(attemptRows.filter((r) => r.interrupted).map((r) => Number(r.payload_id)));
    const { rows: captured } = await pool.query<{ asset_id: number; event_type: string }>(
      'select asset_id, event_type from asset_webhooks.events',
    );
    const capture = compareCapture(
      writer.committed,
      captured.map((r) => ({ assetId: Number(r.asset_id), eventType: r.event_type })),
    );
    const ledger = await readLedger(pool);
    const profile = await settleProfile(pool, lastChangeAt);

    const duplicatesWithInterruptedAttempt = judgement.duplicated.filter(
      (d) => d.payloadId !== null && interruptedPayloads.has(d.payloadId),
    ).length;
    const lastReceipt = receiver.receiptTimes.reduce((a, b) => Math.max(a, b), 0);
    const summary = {
      settle_seconds_after_last_change: round((settledAt - lastChangeAt) / 1000, 1),
      settled,
      seen_settled_seconds_after_last_change: round((sawSettledAt - lastChangeAt) / 1000, 1),
      last_receipt_seconds_after_last_change: round((lastReceipt - lastChangeAt) / 1000, 1),
      changes: writer.committed.length,
      writing_seconds: round((lastChangeAt - started) / 1000, 1),
      crashes: timeline.filter((t) => t.what === 'crash').length,
      kills: timeline.filter((t) => t.what.startsWith('kill')).length,
      kills_with_attempt_in_flight: timeline.filter((t) => t.attemptInFlight === true).length,
      unexpected_exits: runs.reduce((n, run) => n + run.unexpectedExits, 0),
      ambiguous_commits: writer.ambiguous,
      events: captured.length,
      lost_at_capture: capture.missing,
      captured_unexplained: capture.unexplained,
      routes: judgement.routes,
      delivered: judgement.delivered,
      excluded: judgement.excluded,
      excluded_unnamed: judgement.excludedUnnamed,
      collapsed: judgement.collapsed,
      dead_lettered: judgement.deadLettered,
      pending: judgement.pending,
      lost: judgement.lost + capture.missing,
      received_unexpected: judgement.receivedUnexpected,
      duplicates: judgement.duplicates,
      duplicated_events: judgement.duplicated.length,
      duplicated_payloads: duplicatedPayloads.length,
      duplicates_same_payload: judgement.duplicated.filter((d) => d.samePayload).length,
      duplicates_with_interrupted_attempt: duplicatesWithInterruptedAttempt,
      ledger_balanced: ledger.balanced,
    };
    const details = {
      date: new Date().toISOString(),
      machine: { hostname: os.hostname(), cpus: os.cpus().length, node: process.version },
      options,
      summary,
      timeline: timeline.map((t) => ({ ...t, at: round((t.at - started) / 1000, 1) })),
      profile,
      duplicated: judgement.duplicated.map((d) => ({
        ...d,
        interrupted: d.payloadId !== null && interruptedPayloads.has(d.payloadId),
      })),
      logs: work,
    };
    mkdirSync(resultsDirectory, { recursive: true });
    const file = path.join(
      resultsDirectory,
      `${new Date().toISOString().slice(0, 10)}-${os.hostname()}-${os.cpus().length}cpu-chaos.json`,
    );
    writeFileSync(file, `${JSON.stringify(details, null, 2)}\n`);
    const out = process.stdout;
    for (const [name, value] of Object.entries(summary)) out.write(`${name.padEnd(40)}${String(value)}\n`);
    out.write(
      `\ndetails (timeline, the last payloads to settle, duplicates) in ${path.relative(process.cwd(), file)}\n`,
    );
    out.write(`run process logs in ${work}\n`);
    if (options.json) out.write(`${JSON.stringify(summary)}\n`);
  } finally {
    for (const run of runs) await run.stop().catch(() => {});
    await receiver.close().catch(() => {});
    await pool.end().catch(() => {});
    await server.close();
  }
}

/** What was disrupted when (epoch ms; seconds after the start in the results file). */
type Timeline = Array<{ at: number; what: string; seconds?: number; attemptInFlight?: boolean }>;

/** The webhooks of the run: every event, one state, two event types, and one whose receiver is slow. */
const WEBHOOKS = ['all', 'approved', 'lifecycle', 'slow'] as const;

function chaosConfig(receiverUrl: string, requestTimeoutSeconds: number | undefined): string {
  const both = 'resourceTypes: [Resource, Project]';
  return `assetUpdater:
  intervalSeconds: 1
${requestTimeoutSeconds === undefined ? '' : `  requestTimeoutSeconds: ${requestTimeoutSeconds}\n`}  network: { allowPrivateAddresses: true }
  webhooks:
    - { id: all, url: "${receiverUrl}/all", enabled: true, ${both}, concurrency: 8 }
    - { id: approved, url: "${receiverUrl}/approved", enabled: true, ${both}, concurrency: 4, filters: [ { filterKind: state, condition: ANY, value: [approved] } ] }
    - { id: lifecycle, url: "${receiverUrl}/lifecycle", enabled: true, ${both}, eventTypes: [Created, Deleted], concurrency: 4 }
    - { id: slow, url: "${receiverUrl}/slow", enabled: true, ${both}, concurrency: 4 }
`;
}

/**
 * A receiver in this process that answers 200 and records every request's
 * event ids under the webhook its path names; one webhook's requests are
 * answered after a delay. Its sockets are destroyed on close.
 */
async function startRecordingReceiver(options: { slow: { webhookId: string; delayMs: number } }): Promise<{
  url: string;
  receipts: Receipt[];
  receiptTimes: number[];
  close(): Promise<void>;
}> {
  const receipts: Receipt[] = [];
  const receiptTimes: number[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const webhookId = (request.url ?? '/').slice(1);
      const answer = (): void => {
        // Recorded when answered: a request whose answer never left was not received.
        const { events } = JSON.parse(Buffer.concat(chunks).toString()) as { events: Array<{ eventId: string }> };
        receipts.push({ webhookId, eventIds: events.map((e) => e.eventId) });
        receiptTimes.push(Date.now());
        response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      };
      if (webhookId === options.slow.webhookId) setTimeout(answer, options.slow.delayMs);
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  let closed = false;
  return {
    url: `http://127.0.0.1:${port}`,
    receipts,
    receiptTimes,
    close: () =>
      new Promise<void>((resolve) => {
        if (closed) return resolve();
        closed = true;
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * One of the run processes: the real CLI as a child process, its output in a
 * log file of its own per start. It is started again a second after it exits
 * unless this run killed or stopped it (an exit on its own is counted).
 */
class RunSlot {
  private child: ChildProcess | undefined;
  private logPath = '';
  private starts = 0;
  private expectExit = false;
  private stopped = false;
  unexpectedExits = 0;

  constructor(
    private readonly slot: number,
    private readonly databaseUrl: string,
    private readonly configPath: string,
    private readonly logDirectory: string,
  ) {}

  start(): void {
    this.starts += 1;
    this.logPath = path.join(this.logDirectory, `run-${this.slot}-${this.starts}.log`);
    const logFile = openSync(this.logPath, 'a');
    const child = spawn(
      process.execPath,
      [cli, 'run', '--database-url', this.databaseUrl, '--config', this.configPath],
      {
        stdio: ['ignore', logFile, logFile],
        env: { ...process.env, LOG_LEVEL: 'info' },
      },
    );
    closeSync(logFile);
    this.child = child;
    child.once('exit', (code, signal) => {
      if (this.expectExit || this.stopped) return;
      this.unexpectedExits += 1;
      log(`chaos: run process ${this.slot} exited on its own (${signal ?? code}); starting it again`);
      setTimeout(() => {
        if (!this.stopped) this.start();
      }, 1000);
    });
  }

  /** The id the running process records on its attempts (from its first log line), once it has logged it. */
  processId(): string | undefined {
    try {
      return /"processId":"([0-9a-f-]{36})"/.exec(readFileSync(this.logPath, 'utf8'))?.[1];
    } catch {
      return undefined;
    }
  }

  /** SIGKILL, as an OOM kill or a lost machine would end it. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.expectExit = true;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.expectExit = false;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
}

/** Assets that exist before the run, their CREATED events dropped before any run process starts. */
async function seedAssets(pool: pg.Pool, count: number): Promise<number[]> {
  const { rows } = await pool.query<{ asset_id: number }>(
    `insert into assets (supertype, state, title)
     select case when n % 5 = 0 then 'Project' else 'Resource' end,
            case when n % 2 = 0 then 'approved' else 'draft' end, 'seed'
     from generate_series(1, $1::int) n returning asset_id`,
    [count],
  );
  await pool.query('truncate asset_webhooks.outbox');
  return rows.map((r) => Number(r.asset_id));
}

type EventType = 'CREATED' | 'EDITED' | 'DELETED';

/** A small seeded generator (mulberry32): the same seed chooses the same changes. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Commits asset changes at a steady rate over four connections, one change a
 * transaction: creates, edits (some to an asset edited moments before, so
 * edits collapse) and moves to the Trash. Each lane owns its assets, so a
 * change whose commit was cut off by a crash is resolved by reading the asset
 * once the server is back: committed, or tried again. `committed` is then
 * exactly what the database holds, the events the service must account for.
 */
class ChangeWriter {
  readonly committed: Array<{ assetId: number; eventType: EventType }> = [];
  lastCommitAt = 0;
  ambiguous = 0;
  private readonly lanes: Array<{ active: number[]; recent: number[]; random: () => number }>;

  constructor(
    private readonly pool: pg.Pool,
    seeded: readonly number[],
    seed: number,
  ) {
    this.lanes = Array.from({ length: 4 }, (_, lane) => ({
      active: seeded.filter((id) => id % 4 === lane),
      recent: [],
      random: generator(seed * 31 + lane),
    }));
  }

  async write(changes: number, overMs: number, started: number): Promise<void> {
    const spacing = overMs / changes;
    await Promise.all(
      this.lanes.map(async (lane, l) => {
        for (let i = l; i < changes; i += this.lanes.length) {
          const due = started + i * spacing;
          if (due > Date.now()) await sleep(due - Date.now());
          await this.change(lane, i);
        }
      }),
    );
  }

  private async change(lane: ChangeWriter['lanes'][number], i: number): Promise<void> {
    const r = lane.random();
    if (r < 0.3 || lane.active.length < 50) {
      const uuid = randomUUID();
      const supertype = lane.random() < 0.2 ? 'Project' : 'Resource';
      const state = lane.random() < 0.5 ? 'approved' : 'draft';
      const assetId = await this.commit(
        async () =>
          (
            await this.pool.query<{ asset_id: number }>(
              'insert into assets (asset_uuid, supertype, state, title) values ($1, $2, $3, $4) returning asset_id',
              [uuid, supertype, state, `c${i}`],
            )
          ).rows[0]!.asset_id,
        async () =>
          (await this.pool.query<{ asset_id: number }>('select asset_id from assets where asset_uuid = $1', [uuid]))
            .rows[0]?.asset_id ?? null,
      );
      lane.active.push(Number(assetId));
      this.record(Number(assetId), 'CREATED');
    } else if (r < 0.88) {
      const assetId =
        lane.recent.length > 0 && lane.random() < 0.4
          ? lane.recent[Math.floor(lane.random() * lane.recent.length)]!
          : lane.active[Math.floor(lane.random() * lane.active.length)]!;
      const title = `c${i}`;
      await this.commit(
        async () => {
          await this.pool.query('update assets set title = $2 where asset_id = $1', [assetId, title]);
          return true;
        },
        async () =>
          (
            await this.pool.query<{ done: boolean }>('select title = $2 as done from assets where asset_id = $1', [
              assetId,
              title,
            ])
          ).rows[0]!.done || null,
      );
      lane.recent = [...lane.recent.slice(-4), assetId];
      this.record(assetId, 'EDITED');
    } else {
      const index = Math.floor(lane.random() * lane.active.length);
      const assetId = lane.active[index]!;
      lane.active.splice(index, 1);
      lane.recent = lane.recent.filter((id) => id !== assetId);
      await this.commit(
        async () => {
          await this.pool.query('update assets set trashed_at = now() where asset_id = $1', [assetId]);
          return true;
        },
        async () =>
          (
            await this.pool.query<{ done: boolean }>(
              'select trashed_at is not null as done from assets where asset_id = $1',
              [assetId],
            )
          ).rows[0]!.done || null,
      );
      this.record(assetId, 'DELETED');
    }
  }

  private record(assetId: number, eventType: EventType): void {
    this.committed.push({ assetId, eventType });
    this.lastCommitAt = Date.now();
  }

  /**
   * Runs `apply` until it commits. When the connection is lost on the way
   * (a crash), whether it committed is unknown: `committed` reads it once the
   * server answers again (null: it did not, so it is applied again).
   */
  private async commit<T>(apply: () => Promise<T>, committed: () => Promise<T | null>): Promise<T> {
    for (;;) {
      try {
        return await apply();
      } catch (error) {
        if (!isConnectionError(error)) throw error;
      }
      this.ambiguous += 1;
      for (;;) {
        await sleep(250);
        try {
          const found = await committed();
          if (found !== null) return found;
          break;
        } catch (error) {
          if (!isConnectionError(error)) throw error;
        }
      }
    }
  }
}

/**
 * The disruptions, spread over the writing window: server crashes at even
 * steps from a fifth of it, and run-process kills at even steps from its
 * start to its last twentieth (the last kill is the one recovery has least
 * time for before the last change), alternating between the two processes.
 * Each kill is aimed at a process with an attempt in flight (see aim), the
 * case crash recovery exists for. A killed process is started again a
 * second later.
 */
async function disrupt(
  pool: pg.Pool,
  server: RestartablePostgres,
  runs: readonly RunSlot[],
  options: ChaosOptions,
  started: number,
  timeline: Timeline,
): Promise<void> {
  const window = options.seconds * 1000;
  const plan: Array<{ at: number; what: 'crash' | number }> = [
    ...Array.from({ length: options.crashes }, (_, i) => ({
      at: (window * (i + 0.8)) / (options.crashes + 1),
      what: 'crash' as const,
    })),
    ...Array.from({ length: options.kills }, (_, i) => ({
      at: (window * (i + 0.75)) / options.kills,
      what: i % runs.length,
    })),
  ].sort((a, b) => a.at - b.at);
  for (const step of plan) {
    const due = started + step.at;
    if (due > Date.now()) await sleep(due - Date.now());
    const at = Date.now();
    if (step.what === 'crash') {
      await server.stop('immediate');
      await sleep(1000);
      await server.start();
      timeline.push({ at, what: 'crash', seconds: round((Date.now() - at) / 1000, 1) });
      log(
        `chaos: server crashed at ${((at - started) / 1000).toFixed(1)}s, back after ${((Date.now() - at) / 1000).toFixed(1)}s`,
      );
    } else {
      // Aimed within the window: every kill falls while changes are committed.
      const target = await aim(pool, runs, step.what, Math.min(5000, started + window - Date.now()));
      const run = runs[target.slot]!;
      const killedAt = Date.now();
      await run.kill();
      timeline.push({ at: killedAt, what: `kill run ${target.slot}`, attemptInFlight: target.inFlight });
      log(
        `chaos: run process ${target.slot} killed at ${((killedAt - started) / 1000).toFixed(1)}s${target.inFlight ? ', an attempt in flight' : ', no attempt in flight'}`,
      );
      setTimeout(() => run.start(), 1000);
    }
  }
}

/**
 * Which run process to kill: the preferred one, or else the other, once it
 * has an attempt without a result (a request in flight), waiting up to
 * `timeoutMs` for one; the preferred one when none came.
 */
async function aim(
  pool: pg.Pool,
  runs: readonly RunSlot[],
  preferred: number,
  timeoutMs: number,
): Promise<{ slot: number; inFlight: boolean }> {
  const order = [preferred, ...runs.keys()].filter((slot, i, all) => all.indexOf(slot) === i);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const { rows } = await pool.query<{ process_id: string }>(
        'select distinct process_id from asset_webhooks.attempts where outcome is null and process_id is not null',
      );
      const inFlight = new Set(rows.map((r) => r.process_id));
      const slot = order.find((s) => {
        const id = runs[s]!.processId();
        return id !== undefined && inFlight.has(id);
      });
      if (slot !== undefined) return { slot, inFlight: true };
    } catch (error) {
      if (!isConnectionError(error)) throw error;
    }
    await sleep(50);
  }
  return { slot: preferred, inFlight: false };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`chaos: not ready within ${timeoutMs / 1000}s`);
    await sleep(200);
  }
}

/** Until the outbox is empty and no payload waits: every captured event has ended. False at the timeout. */
async function waitUntilSettled(pool: pg.Pool, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query<{ waiting: number }>(
      `select (select count(*) from asset_webhooks.outbox)::int
            + (select count(*) from asset_webhooks.payloads where status in ('open', 'pending'))::int as waiting`,
    );
    if (rows[0]!.waiting === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(250);
  }
}

/** The payloads whose events some receiver got more than once. */
function duplicatedPayloadIds(outcomes: readonly OutcomeRow[], receipts: readonly Receipt[]): number[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const receipt of receipts)
    for (const eventId of receipt.eventIds) {
      const k = `${receipt.webhookId} ${eventId}`;
      if (seen.has(k)) twice.add(k);
      seen.add(k);
    }
  const ids = new Set<number>();
  for (const row of outcomes)
    if (row.payloadId !== null && twice.has(`${row.webhookId} ${row.eventId}`)) ids.add(row.payloadId);
  return [...ids];
}

/**
 * What the end of the run waited on: attempts by error class and outcome,
 * and the last payloads to settle with their attempts (the process that made
 * each, when it started, how it ended), in seconds after the last change.
 */
async function settleProfile(pool: pg.Pool, lastChangeAt: number): Promise<unknown> {
  const { rows: attempts } = await pool.query(
    `select coalesce(error_class, '-') as error_class, coalesce(outcome, 'unfinished') as outcome, count(*)::int as n
     from asset_webhooks.attempts group by 1, 2 order by 3 desc`,
  );
  const { rows: last } = await pool.query(
    `select p.payload_id, p.webhook_id, p.status, p.event_count,
            round(((extract(epoch from p.created_at) * 1000 - $1) / 1000)::numeric, 1) as created_s,
            round(((extract(epoch from coalesce(p.delivered_at, p.dead_lettered_at)) * 1000 - $1) / 1000)::numeric, 1) as ended_s,
            (select json_agg(json_build_object(
                      'no', a.attempt_no,
                      'started_s', round(((extract(epoch from a.started_at) * 1000 - $1) / 1000)::numeric, 1),
                      'error', a.error_class, 'outcome', a.outcome, 'process', left(a.process_id, 8))
                    order by a.attempt_no)
             from asset_webhooks.attempts a where a.payload_id = p.payload_id) as attempts
     from asset_webhooks.payloads p
     order by coalesce(p.delivered_at, p.dead_lettered_at) desc nulls first limit 8`,
    [lastChangeAt],
  );
  const { rows: coalescing } = await pool.query(
    `select round(max(extract(epoch from coalesced_at - occurred_at))::numeric, 1) as max_capture_to_coalesced_s,
            round(((max(extract(epoch from coalesced_at)) * 1000 - $1) / 1000)::numeric, 1) as last_coalesced_s
     from asset_webhooks.events`,
    [lastChangeAt],
  );
  return { attempts, lastPayloads: last, coalescing: coalescing[0] };
}

function round(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}
