import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { httpServer, tcpServer, type LocalServer } from '../helpers/http-servers.js';
import {
  complete,
  gzipBomb,
  hostileServer,
  informationalForever,
  requestEventIds,
  responseHead,
  stream,
  TLS_BYTES,
  type Answer,
  type HostileServer,
} from '../helpers/hostile-servers.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { settleLeases, sweepsPass } from '../helpers/pump-metrics.js';

/**
 * Issue 45, section 1: whatever a receiver answers is data, never a fault.
 * A `run` process delivers to one webhook per hostile receiver below and to
 * a healthy webhook beside them all, while assets change and the process is
 * restarted. Every row must show its attempts recorded with a
 * classification and its webhook going on with its schedule; the healthy
 * webhook must get every event exactly once, within the interval plus a
 * second. The second test does the Retry-After rows again with
 * retry.honorRetryAfter (CONTRACT section 7), where their values are read.
 *
 * On failure each row's problems, and run's warnings and errors, are written
 * to stderr. HOSTILE_ROWS=id,id runs only those rows (beside the healthy
 * webhook), to see one row without the others' effects.
 */

const tempDirectory = useTempDirectories();
const db = useTestDatabase();
const cleanup = useCleanup();

const INTERVAL_SECONDS = 1;
const REQUEST_TIMEOUT_SECONDS = 2;
const DELAYS_SECONDS = [1, 1, 1];
/** How much later than its due time a retry may start: the pump's poll, a claim and a settle on a busy machine. */
const SCHEDULE_SLACK_MS = 3500;
/** Attempt times are recorded to the millisecond by two clocks of one machine: what rounding may take off a delay. */
const ROUNDING_MS = 50;

/** What the service must make of a row's answers. */
type Expected =
  /** A 2xx: every payload delivered at its first attempt, every event received once. */
  | { readonly kind: 'delivered' }
  /**
   * Not a 2xx: every attempt retried on the delaysSeconds schedule (the
   * receiver's Retry-After changes nothing by default), the first payload
   * dead-lettered `retries_exhausted` after its last retry, the next payload
   * attempted after it. `status`: the status every attempt records;
   * `error`: the error class every attempt records; neither: a status or an
   * error class, whichever the service makes of it.
   */
  | {
      readonly kind: 'retried';
      readonly status?: number;
      readonly error?: string;
      /** With `status`: an error class that may stand instead (a status the service takes for no valid status). */
      readonly orError?: string;
      readonly excerpt?: RegExp;
    }
  /**
   * A Retry-After that the service may honour (retry.honorRetryAfter: true):
   * each retry comes no later than the delivery window's end, and the
   * payload ends (expired or retries_exhausted) when the window has passed.
   */
  | { readonly kind: 'held at most to the window' };

interface Row {
  readonly id: string;
  readonly what: string;
  readonly answer: Answer;
  readonly expected: Expected;
}

const SERVICE_UNAVAILABLE = 'HTTP/1.1 503 Service Unavailable';

/** A 503 carrying the given Retry-After field lines. */
function retryAfter(id: string, what: string, values: ReadonlyArray<string | Buffer>, expected?: Expected): Row {
  return {
    id,
    what,
    answer: complete(
      SERVICE_UNAVAILABLE,
      values.map((value) => ['Retry-After', value] as const),
      'busy',
    ),
    expected: expected ?? { kind: 'retried', status: 503 },
  };
}

/** The Retry-After rows, each a value no receiver should be able to stop a webhook with. */
function retryAfterRows(expectedFor: (valid: boolean) => Expected | undefined): Row[] {
  return [
    // Past the range of a JavaScript Date in milliseconds.
    retryAfter('ra-huge', 'Retry-After: 9999999999999', ['9999999999999'], expectedFor(true)),
    retryAfter('ra-negative', 'Retry-After: -120', ['-120'], expectedFor(false)),
    retryAfter('ra-fraction', 'Retry-After: 1.5', ['1.5'], expectedFor(false)),
    retryAfter('ra-zero', 'Retry-After: 0', ['0'], expectedFor(false)),
    retryAfter('ra-empty', 'Retry-After: (empty)', [''], expectedFor(false)),
    // Two field lines of a singleton field: "3600, 1" is no valid value.
    retryAfter('ra-repeated', 'Retry-After: 3600 and Retry-After: 1', ['3600', '1'], expectedFor(false)),
    retryAfter(
      'ra-year-9999',
      'Retry-After: an HTTP date in 9999',
      ['Fri, 31 Dec 9999 23:59:59 GMT'],
      expectedFor(true),
    ),
    retryAfter(
      'ra-before-1970',
      'Retry-After: an HTTP date in 1969',
      ['Wed, 31 Dec 1969 23:59:59 GMT'],
      expectedFor(false),
    ),
    // Fullwidth digits, sent as UTF-8 bytes in the field value.
    retryAfter(
      'ra-non-ascii',
      'Retry-After: non-ASCII (fullwidth digits as UTF-8)',
      [Buffer.from('\uff13\uff16\uff10\uff10 \u23f3', 'utf8')],
      expectedFor(false),
    ),
  ];
}

/** Every other row: statuses, bodies, headers and transports a receiver should not be able to break delivery with. */
function answerRows(trap: LocalServer): Row[] {
  return [
    {
      id: 'status-1xx-only',
      what: '102 Processing every 250 ms, never a final status',
      answer: informationalForever(250),
      expected: { kind: 'retried' },
    },
    {
      id: 'status-101',
      what: '101 Switching Protocols to a POST that asked for no upgrade',
      answer: (socket, _request, bytes) => {
        const head = responseHead('HTTP/1.1 101 Switching Protocols', [
          ['Connection', 'Upgrade'],
          ['Upgrade', 'websocket'],
        ]);
        const frame = Buffer.from([0x81, 0x05, ...Buffer.from('hello')]);
        bytes.add(head.length + frame.length);
        socket.end(Buffer.concat([head, frame]));
      },
      expected: { kind: 'retried' },
    },
    {
      // Following it would be a request to the cloud metadata address: the 307 must be only a status.
      id: 'status-3xx-metadata',
      what: '307 with Location: http://169.254.169.254/latest/meta-data/iam/security-credentials/',
      answer: complete('HTTP/1.1 307 Temporary Redirect', [
        ['Location', 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'],
      ]),
      expected: { kind: 'retried', status: 307 },
    },
    {
      // The same on loopback, where following would be seen: the trap must get no connection.
      id: 'status-3xx-loopback',
      what: '302 with Location: a loopback trap server',
      answer: complete('HTTP/1.1 302 Found', [['Location', `${trap.origin}/followed`]]),
      expected: { kind: 'retried', status: 302 },
    },
    {
      id: 'status-600',
      what: 'status 600',
      answer: complete('HTTP/1.1 600 Beyond', [['Content-Type', 'text/plain']], 'beyond'),
      // Outside 100..599: recorded as it came, or taken for no valid status.
      expected: { kind: 'retried', status: 600, orError: 'invalid_response' },
    },
    {
      id: 'status-999',
      what: 'status 999',
      answer: complete('HTTP/1.1 999 Far Beyond', [['Content-Type', 'text/plain']], 'far beyond'),
      expected: { kind: 'retried', status: 999, orError: 'invalid_response' },
    },
    {
      id: 'body-nul-500',
      what: '500 with the body error\\0page',
      answer: complete(
        'HTTP/1.1 500 Internal Server Error',
        [['Content-Type', 'text/plain']],
        Buffer.from('error\0page'),
      ),
      // The NUL made storable; what surrounds it kept.
      expected: { kind: 'retried', status: 500, excerpt: /^error[^\0]+page$/ },
    },
    {
      id: 'body-nul-200',
      what: '200 with the body ok\\0!',
      answer: complete('HTTP/1.1 200 OK', [['Content-Type', 'text/plain']], Buffer.from('ok\0!')),
      expected: { kind: 'delivered' },
    },
    {
      id: 'body-utf8-500',
      what: '500 with invalid UTF-8 (0xFF 0xFE, a truncated sequence, an encoded surrogate)',
      answer: complete(
        'HTTP/1.1 500 Internal Server Error',
        [['Content-Type', 'text/plain; charset=utf-8']],
        INVALID_UTF8,
      ),
      expected: { kind: 'retried', status: 500, excerpt: /^err[^\0]+!$/ },
    },
    {
      id: 'body-utf8-200',
      what: '200 with invalid UTF-8',
      answer: complete('HTTP/1.1 200 OK', [['Content-Type', 'text/plain; charset=utf-8']], INVALID_UTF8),
      expected: { kind: 'delivered' },
    },
    {
      id: 'body-endless',
      what: '503, chunked, one chunk, then never another and never the end',
      answer: (socket, _request, bytes) => {
        const head = responseHead(SERVICE_UNAVAILABLE, [
          ['Content-Type', 'text/plain'],
          ['Transfer-Encoding', 'chunked'],
        ]);
        const chunk = Buffer.from('5\r\nhello\r\n');
        bytes.add(head.length + chunk.length);
        socket.write(Buffer.concat([head, chunk]));
      },
      expected: { kind: 'retried', status: 503 },
    },
    {
      id: 'body-gigabytes',
      what: '200 with Content-Length: 8 GiB, written as fast as it is read',
      answer: (socket, _request, bytes) => {
        const head = responseHead('HTTP/1.1 200 OK', [
          ['Content-Type', 'text/plain'],
          ['Content-Length', String(8 * GIB)],
        ]);
        bytes.add(head.length);
        socket.write(head);
        stream(socket, Buffer.alloc(64 * 1024, 'g'), GIGABYTES_WRITTEN_AT_MOST, bytes);
      },
      expected: { kind: 'delivered' },
    },
    {
      id: 'body-gzip-bomb',
      what: '500 with Content-Encoding: gzip, 1 MiB on the wire inflating to 1 GiB',
      answer: complete(
        'HTTP/1.1 500 Internal Server Error',
        [
          ['Content-Type', 'text/plain'],
          ['Content-Encoding', 'gzip'],
        ],
        GZIP_BOMB,
      ),
      expected: { kind: 'retried', status: 500 },
    },
    {
      id: 'body-reset',
      what: '500 with Content-Length: 1000, 7 bytes, then a TCP reset',
      answer: (socket, _request, bytes) => {
        const message = Buffer.concat([
          responseHead('HTTP/1.1 500 Internal Server Error', [
            ['Content-Type', 'text/plain'],
            ['Content-Length', '1000'],
          ]),
          Buffer.from('partial'),
        ]);
        bytes.add(message.length);
        socket.write(message);
        // Time for the client to read the head before the reset discards what it has not read.
        setTimeout(() => socket.resetAndDestroy(), 200);
      },
      expected: { kind: 'retried', status: 500 },
    },
    {
      id: 'headers-1mb',
      what: '503 with a 1 MiB header',
      answer: complete(SERVICE_UNAVAILABLE, [['X-Padding', 'a'.repeat(1024 * 1024)]], 'busy'),
      expected: { kind: 'retried' },
    },
    {
      id: 'tls-bytes',
      what: 'a TLS ServerHello and handshake_failure alert in answer to plain HTTP',
      answer: (socket, _request, bytes) => {
        bytes.add(TLS_BYTES.length);
        socket.end(TLS_BYTES);
      },
      expected: { kind: 'retried' },
    },
  ];
}

const GIB = 1024 * 1024 * 1024;
/** Past this a gigabytes receiver hangs up itself: far more than a client that stops at its excerpt reads. */
const GIGABYTES_WRITTEN_AT_MOST = 256 * 1024 * 1024;
/** What a client that stops at its excerpt may make a gigabytes receiver write per request: socket buffers. */
const GIGABYTES_PER_REQUEST_AT_MOST = 32 * 1024 * 1024;
const GZIP_BOMB = gzipBomb({ megabytes: 16, members: 64 });
const INVALID_UTF8 = Buffer.from([0x65, 0x72, 0x72, 0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x21]);

/** A server that accepts connections and never reads from them, nor answers. */
async function neverReads(): Promise<LocalServer> {
  return tcpServer((socket) => {
    socket.pause();
    socket.on('error', () => {});
  });
}

/**
 * The rows to run: all, unless HOSTILE_ROWS names some (comma-separated ids),
 * to see one row beside the healthy webhook without the others' effects.
 */
function selected(rows: Row[]): Row[] {
  const only = process.env.HOSTILE_ROWS?.split(',').filter(Boolean);
  if (!only?.length) return rows;
  return rows.filter((row) => only.includes(row.id));
}

interface AttemptRow {
  webhook_id: string;
  payload_id: number;
  status: string;
  dead_letter_reason: string | null;
  series_started_at: Date;
  attempt_no: number | null;
  started_at: Date | null;
  duration_ms: number | null;
  status_code: number | null;
  error_class: string | null;
  error_message: string | null;
  response_excerpt: string | null;
  outcome: string | null;
  process_id: string | null;
}

/** Every payload of the webhooks with its attempts (a payload without one appears once, attempt_no null). */
async function attemptRows(webhookIds: readonly string[]): Promise<AttemptRow[]> {
  const { rows } = await db.pool.query<AttemptRow>(
    `select p.webhook_id, p.payload_id::int, p.status, p.dead_letter_reason, p.series_started_at,
            a.attempt_no, a.started_at, a.duration_ms, a.status_code, a.error_class, a.error_message,
            a.response_excerpt, a.outcome, a.process_id
     from asset_webhooks.payloads p
     left join asset_webhooks.attempts a on a.payload_id = p.payload_id and a.series = p.series
     where p.webhook_id = any($1::text[])
     order by p.payload_id, a.attempt_no`,
    [webhookIds],
  );
  return rows;
}

/** The events routed to a webhook (coalesced), by eventId. */
async function routedEvents(webhookId: string): Promise<string[]> {
  const { rows } = await db.pool.query<{ event_id: string }>(
    `select event_id::text from asset_webhooks.event_outcomes where webhook_id = $1 and outcome <> 'excluded' order by event_id`,
    [webhookId],
  );
  return rows.map((row) => row.event_id);
}

interface Payload {
  readonly payloadId: number;
  readonly status: string;
  readonly deadLetterReason: string | null;
  readonly seriesStartedAt: Date;
  readonly attempts: AttemptRow[];
}

function byPayload(rows: readonly AttemptRow[], webhookId: string): Payload[] {
  const payloads = new Map<number, Payload>();
  for (const row of rows) {
    if (row.webhook_id !== webhookId) continue;
    let payload = payloads.get(row.payload_id);
    if (!payload) {
      payload = {
        payloadId: row.payload_id,
        status: row.status,
        deadLetterReason: row.dead_letter_reason,
        seriesStartedAt: row.series_started_at,
        attempts: [],
      };
      payloads.set(row.payload_id, payload);
    }
    if (row.attempt_no !== null) payload.attempts.push(row);
  }
  return [...payloads.values()];
}

const attemptEnd = (attempt: AttemptRow): number => attempt.started_at!.getTime() + (attempt.duration_ms ?? 0);

/** How one attempt reads in a failure message. */
function show(attempt: AttemptRow): string {
  return JSON.stringify({
    payload: attempt.payload_id,
    attempt: attempt.attempt_no,
    status: attempt.status_code,
    error: attempt.error_class,
    message: attempt.error_message?.slice(0, 120),
    excerpt: attempt.response_excerpt?.slice(0, 40),
    outcome: attempt.outcome,
  });
}

/**
 * Whether a row has shown what it must (its first payload ended by the
 * rules and the next one attempted; for a 2xx, every routed event received):
 * the test waits for every row to be done or for its deadline.
 */
function rowDone(
  row: Row,
  payloads: readonly Payload[],
  received: ReadonlyMap<string, number>,
  routed: string[],
): boolean {
  if (row.expected.kind === 'delivered')
    return routed.length > 0 && routed.every((eventId) => (received.get(eventId) ?? 0) >= 1);
  const [first] = payloads;
  return first !== undefined && first.status === 'dead_lettered' && laterAttempted(payloads);
}

/**
 * Whether a payload after the first has a finished attempt: the webhook went
 * on. Not necessarily the second: payloads that waited behind a held first
 * one may have expired unsent.
 */
function laterAttempted(payloads: readonly Payload[]): boolean {
  return payloads.slice(1).some((payload) => payload.attempts.some((attempt) => attempt.outcome !== null));
}

/** The problems of one row, each a line; none when the row holds. */
function rowProblems(
  row: Row,
  payloads: readonly Payload[],
  received: ReadonlyMap<string, number> | null,
  routed: readonly string[],
  options: { windowSeconds: number },
): string[] {
  const problems: string[] = [];
  const attempts = payloads.flatMap((payload) => payload.attempts);
  if (attempts.length === 0) return ['no attempt recorded'];
  for (const attempt of attempts) {
    if (attempt.outcome === null) problems.push(`attempt left without an outcome: ${show(attempt)}`);
    if (attempt.status_code === null && attempt.error_class === null)
      problems.push(`attempt recorded without a status or an error class: ${show(attempt)}`);
  }
  const expected = row.expected;
  if (expected.kind === 'delivered') {
    for (const attempt of attempts)
      if (attempt.status_code !== 200 || attempt.outcome !== 'delivered')
        problems.push(`expected every attempt delivered with 200, got ${show(attempt)}`);
    for (const payload of payloads)
      if (payload.status !== 'delivered')
        problems.push(`payload ${payload.payloadId} is ${payload.status}, not delivered`);
    if (received) problems.push(...exactlyOnce(routed, received));
    return problems;
  }
  for (const attempt of attempts) {
    if (attempt.outcome === 'delivered') problems.push(`a failed answer counted as delivered: ${show(attempt)}`);
    if (
      expected.kind === 'retried' &&
      expected.status !== undefined &&
      attempt.status_code !== expected.status &&
      (expected.orError === undefined || attempt.error_class !== expected.orError)
    )
      problems.push(
        `expected status ${expected.status}${expected.orError ? ` or error class ${expected.orError}` : ''}, got ${show(attempt)}`,
      );
    if (expected.kind === 'retried' && expected.error !== undefined && attempt.error_class !== expected.error)
      problems.push(`expected error class ${expected.error}, got ${show(attempt)}`);
    if (expected.kind === 'retried' && expected.excerpt && !expected.excerpt.test(attempt.response_excerpt ?? ''))
      problems.push(`expected an excerpt matching ${String(expected.excerpt)}, got ${show(attempt)}`);
  }
  const [first] = payloads;
  if (!first) return problems;
  const sequence = first.attempts.map((attempt) => attempt.outcome);
  if (expected.kind === 'retried') {
    const schedule = [...DELAYS_SECONDS.map(() => 'retry'), 'retries_exhausted'];
    if (JSON.stringify(sequence) !== JSON.stringify(schedule))
      problems.push(
        `expected the first payload's attempts to end ${schedule.join(', ')}, got ${sequence.join(', ') || 'none'}` +
          ` (payload ${first.status}${first.deadLetterReason ? ` ${first.deadLetterReason}` : ''})`,
      );
    // Each retry at its delay: the receiver's Retry-After neither shortens nor lengthens it.
    // (A restart between two attempts takes what it takes.)
    first.attempts.slice(1).forEach((next, index) => {
      const previous = first.attempts[index]!;
      if (next.process_id !== previous.process_id) return;
      const gap = next.started_at!.getTime() - attemptEnd(previous);
      const delay = DELAYS_SECONDS[index]! * 1000;
      if (gap < delay - ROUNDING_MS || gap > delay + SCHEDULE_SLACK_MS)
        problems.push(
          `expected attempt ${next.attempt_no} ${delay} ms after attempt ${previous.attempt_no} ended, got ${gap} ms`,
        );
    });
  } else {
    // Honoured, a Retry-After holds a payload at most until its window's end, where the payload ends.
    const windowEnd = first.seriesStartedAt.getTime() + options.windowSeconds * 1000;
    for (const attempt of first.attempts.slice(1))
      if (attempt.started_at!.getTime() > windowEnd + SCHEDULE_SLACK_MS)
        problems.push(`a retry after the delivery window's end: ${show(attempt)}`);
    if (first.status !== 'dead_lettered')
      problems.push(`expected the first payload dead-lettered once its window passed, it is ${first.status}`);
    else if (first.deadLetterReason !== 'expired' && first.deadLetterReason !== 'retries_exhausted')
      problems.push(`expected the first payload expired or retries_exhausted, got ${first.deadLetterReason}`);
  }
  if (!laterAttempted(payloads)) problems.push('no later payload was attempted: the webhook stopped');
  return problems;
}

/** Every routed event received exactly once; nothing received that was not routed. */
function exactlyOnce(routed: readonly string[], received: ReadonlyMap<string, number>): string[] {
  const problems: string[] = [];
  const missing = routed.filter((eventId) => !received.has(eventId));
  const twice = [...received].filter(([, count]) => count > 1);
  const stray = [...received.keys()].filter((eventId) => !routed.includes(eventId));
  if (missing.length > 0) problems.push(`${missing.length} of ${routed.length} events never arrived`);
  if (twice.length > 0)
    problems.push(
      `${twice.length} events arrived more than once (${twice.reduce((n, [, c]) => n + c, 0)} requests for them)`,
    );
  if (stray.length > 0) problems.push(`${stray.length} events arrived that were not routed`);
  if (routed.length === 0) problems.push('no event was routed');
  return problems;
}

/** Requests per eventId. */
function countByEvent(eventIds: Iterable<string>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const eventId of eventIds) counts.set(eventId, (counts.get(eventId) ?? 0) + 1);
  return counts;
}

interface HealthyEvent {
  readonly eventId: string;
  readonly eventTimestamp: string;
}

function healthyEvents(receiver: TestReceiver): Array<HealthyEvent & { readonly at: number }> {
  return receiver.requests.flatMap((request) =>
    (JSON.parse(request.body) as { events: HealthyEvent[] }).events.map((event) => ({ ...event, at: request.at })),
  );
}

/** The healthy webhook's problems: each routed event once, each within the interval plus a second of occurring. */
function healthyProblems(receiver: TestReceiver, routed: readonly string[]): string[] {
  const events = healthyEvents(receiver);
  const problems = exactlyOnce(routed, countByEvent(events.map((event) => event.eventId)));
  const limit = (INTERVAL_SECONDS + 1) * 1000;
  const latencies = events.map((event) => event.at - Date.parse(event.eventTimestamp)).sort((a, b) => a - b);
  const late = latencies.filter((latency) => latency > limit);
  if (late.length > 0) {
    const at = (share: number): number =>
      latencies[Math.min(latencies.length - 1, Math.floor(share * latencies.length))]!;
    problems.push(
      `${late.length} of ${events.length} events arrived later than ${limit} ms ` +
        `(latency median ${at(0.5)} ms, 90th percentile ${at(0.9)} ms, latest ${latencies.at(-1)} ms)`,
    );
  }
  return problems;
}

function writeConfig(yaml: string): string {
  const file = path.join(tempDirectory('aw-hostile-'), 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

function document(webhooks: ReadonlyArray<{ id: string; url: string }>, retry: Record<string, unknown> = {}): string {
  return JSON.stringify({
    assetUpdater: {
      intervalSeconds: INTERVAL_SECONDS,
      requestTimeoutSeconds: REQUEST_TIMEOUT_SECONDS,
      network: { allowPrivateAddresses: true },
      retry: { delaysSeconds: DELAYS_SECONDS, ...retry },
      webhooks: webhooks.map((webhook) => ({ ...webhook, enabled: true })),
    },
  });
}

async function startRun(configFile: string, httpPort?: number): Promise<CliProcess> {
  const port = httpPort === undefined ? [] : ['--http-port', String(httpPort)];
  const started = startCli(['run', '--database-url', db.url, '--config', configFile, ...port], {
    env: { LOG_LEVEL: 'info' },
  });
  cleanup.process(started);
  await eventually(
    async () => {
      if (started.child.exitCode !== null)
        throw new Error(`run exited ${started.child.exitCode}:\n${started.output.stderr}`);
      return started.output.stderr.includes('asset-webhooks running') ? true : undefined;
    },
    { timeoutMs: 20_000, what: 'run to start' },
  );
  return started;
}

/** Inserts one asset every `everyMs` for `forMs`: a stream of CREATED events to every webhook. */
async function assetStream(forMs: number, everyMs: number): Promise<string> {
  const until = Date.now() + forMs;
  let last = '';
  while (Date.now() < until) {
    const { rows } = await db.pool.query<{ asset_id: string }>(
      'insert into assets default values returning asset_id::text',
    );
    last = rows[0]!.asset_id;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return last;
}

/** Peak resident memory of a process in bytes (Linux). */
function peakRss(pid: number): number {
  const line = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(line?.[1] ?? 0) * 1024;
}

/** The log lines of a run process at level warn or above, for failure messages. */
function troubleLines(log: string): string[] {
  return log
    .split('\n')
    .filter((line) => /"level":(40|50|60)/.test(line))
    .map((line) => line.slice(0, 400));
}

interface Started {
  readonly rows: readonly Row[];
  readonly servers: Map<string, HostileServer | LocalServer>;
  readonly healthy: TestReceiver;
}

async function startReceivers(
  rows: readonly Row[],
  extra: Array<{ id: string; server: LocalServer }> = [],
): Promise<Started> {
  const started = new Map<string, HostileServer | LocalServer>();
  for (const row of rows) {
    const server = await hostileServer(row.answer);
    cleanup.close(server);
    started.set(row.id, server);
  }
  for (const { id, server } of extra) started.set(id, server);
  const healthy = await startTestReceiver();
  cleanup.close(healthy);
  return { rows, servers: started, healthy };
}

function webhooksOf(started: Started): Array<{ id: string; url: string }> {
  return [
    { id: 'healthy', url: started.healthy.url },
    ...[...started.servers].map(([id, server]) => ({
      id,
      url: 'url' in server ? server.url : `${server.origin}/hook`,
    })),
  ];
}

function received(server: HostileServer | LocalServer | undefined): Map<string, number> | null {
  return server && 'requests' in server ? countByEvent(server.requests.flatMap(requestEventIds)) : null;
}

/** Waits until every row is done (see rowDone) and the healthy webhook has every routed event, or until the deadline. */
async function untilDone(started: Started, deadlineMs: number): Promise<void> {
  const ids = started.rows.map((row) => row.id);
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const rows = await attemptRows(ids);
    let done = true;
    for (const row of started.rows) {
      const counts = received(started.servers.get(row.id)) ?? new Map<string, number>();
      if (!rowDone(row, byPayload(rows, row.id), counts, await routedEvents(row.id))) done = false;
    }
    const healthyRouted = await routedEvents('healthy');
    const healthyCounts = countByEvent(healthyEvents(started.healthy).map((event) => event.eventId));
    if (done && healthyRouted.every((eventId) => healthyCounts.has(eventId))) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Waits until the receiver has an event of the asset, or until the deadline (the assertions say what is missing). */
async function untilReceived(receiver: TestReceiver, assetId: string, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const events = receiver.requests.flatMap(
      (request) => (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events,
    );
    if (events.some((event) => String(event.assetId) === assetId)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

it(
  "no receiver answer stops its webhook, loses another webhook's results, or duplicates: every hostile receiver at once beside a healthy webhook, under a stream of changes and a restart",
  { timeout: 110_000 },
  async () => {
    await resetData(db.pool);
    const trap = await httpServer((_request, response) => response.writeHead(200).end('followed'));
    cleanup.close(trap);
    const silent = await neverReads();
    cleanup.close(silent);
    const rows: Row[] = selected([
      ...retryAfterRows(() => undefined),
      ...answerRows(trap),
      {
        id: 'never-reads',
        what: 'accepts the connection and never reads',
        answer: () => {},
        expected: { kind: 'retried', error: 'timeout' },
      },
    ]);
    const started = await startReceivers(
      rows.filter((row) => row.id !== 'never-reads'),
      rows.some((row) => row.id === 'never-reads') ? [{ id: 'never-reads', server: silent }] : [],
    );
    const startedRows = { ...started, rows };
    const config = writeConfig(document(webhooksOf(startedRows)));

    // Changes stream in while the first process runs, then while the second does: the restart
    // comes in the middle of the rows' schedules, as restarts do.
    const first = await startRun(config);
    const beforeRestart = await assetStream(4_000, 250);
    // Events that occur while no process runs cannot arrive within the interval: the stream pauses.
    await untilReceived(started.healthy, beforeRestart, 8_000);
    const firstPeak = peakRss(first.child.pid!);
    first.child.kill('SIGTERM');
    const firstExit = await first.exited;
    const secondPort = await freePort();
    const second = await startRun(config, secondPort);
    await assetStream(6_000, 250);
    await untilDone(startedRows, 25_000);
    // Until the second process's crash recovery has run, which would send again what the first
    // left unrecorded: it closes the attempts of gone processes once it has held its own lease
    // 15 s (moved that far into its past here), at its next sweep; two sweeps, so one began after.
    await settleLeases(db.pool);
    await sweepsPass(secondPort, 2);
    const peak = Math.max(firstPeak, peakRss(second.child.pid!));
    second.child.kill('SIGTERM');
    const secondExit = await second.exited;

    const windowSeconds = 86_400;
    const all = await attemptRows(rows.map((row) => row.id));
    const report: string[] = [];
    for (const row of rows) {
      const problems = rowProblems(
        row,
        byPayload(all, row.id),
        received(startedRows.servers.get(row.id)),
        await routedEvents(row.id),
        { windowSeconds },
      );
      if (problems.length > 0) report.push(`${row.id} (${row.what}):\n  ${problems.join('\n  ')}`);
      expect.soft(problems, `${row.id}: ${row.what}`).toEqual([]);
    }
    const healthy = healthyProblems(started.healthy, await routedEvents('healthy'));
    expect.soft(healthy, 'the healthy webhook beside them').toEqual([]);
    // A redirect is a status: nothing connected to the trap the 302 pointed at.
    expect.soft(trap.connections(), 'connections to the loopback target of a 302').toBe(0);
    const gigabytes = startedRows.servers.get('body-gigabytes') as HostileServer | undefined;
    if (gigabytes)
      expect
        .soft(gigabytes.bytesWritten(), 'bytes a gigabytes answer wrote')
        .toBeLessThan(Math.max(1, gigabytes.requests.length) * GIGABYTES_PER_REQUEST_AT_MOST);
    expect.soft(peak, 'peak resident memory of run (bytes)').toBeLessThan(512 * 1024 * 1024);
    const { rows: open } = await db.pool.query<{ n: number }>(
      'select count(*)::int as n from asset_webhooks.attempts where outcome is null',
    );
    expect.soft(open[0]!.n, 'attempts without an outcome after both processes stopped').toBe(0);
    expect.soft([firstExit, secondExit], 'exit statuses on SIGTERM').toEqual([0, 0]);

    // trace shows, for the first event, every webhook's attempts with a classification and an outcome.
    const { rows: firstEvent } = await db.pool.query<{ event_id: string }>(
      `select event_id::text from asset_webhooks.event_outcomes where webhook_id = 'healthy' order by occurred_at limit 1`,
    );
    const trace = await runCli(['trace', firstEvent[0]!.event_id, '--json', '--database-url', db.url]);
    expect(trace.code, trace.stderr).toBe(0);
    const traced = JSON.parse(trace.stdout) as {
      routes: Array<{
        webhookId: string;
        payload: {
          attempts: Array<{ statusCode: number | null; error: string | null; outcome: string | null }>;
        } | null;
      }>;
    };
    const untraced = traced.routes
      .filter(
        (route) =>
          !route.payload ||
          route.payload.attempts.length === 0 ||
          route.payload.attempts.some(
            (attempt) => attempt.outcome === null || (attempt.statusCode === null && attempt.error === null),
          ),
      )
      .map((route) => route.webhookId);
    expect.soft(untraced, 'webhooks whose first attempt trace shows unclassified or open').toEqual([]);

    if (report.length > 0 || healthy.length > 0)
      process.stderr.write(
        `hostile receivers, rows that failed:\n${report.join('\n')}\nhealthy: ${healthy.join('; ') || 'ok'}\n` +
          `load average ${os
            .loadavg()
            .map((load) => load.toFixed(1))
            .join(' ')} on ${os.availableParallelism()} cores\n` +
          `run's warnings and errors (first 40):\n${troubleLines(first.output.stderr + second.output.stderr)
            .slice(0, 40)
            .join('\n')}\n`,
      );
  },
);

it(
  'with retry.honorRetryAfter, no Retry-After holds a webhook past the delivery window, and invalid ones are ignored, beside a healthy webhook',
  { timeout: 60_000 },
  async () => {
    await resetData(db.pool);
    const windowSeconds = 15;
    const rows = selected(retryAfterRows((valid) => (valid ? { kind: 'held at most to the window' } : undefined)));
    const started = await startReceivers(rows);
    const config = writeConfig(
      document(webhooksOf(started), { honorRetryAfter: true, deadLetterAfterSeconds: windowSeconds }),
    );
    const run = await startRun(config);
    await assetStream(6_000, 250);
    await untilDone(started, windowSeconds * 1000 + 12_000);
    run.child.kill('SIGTERM');
    const exit = await run.exited;

    const all = await attemptRows(rows.map((row) => row.id));
    const report: string[] = [];
    for (const row of rows) {
      const problems = rowProblems(row, byPayload(all, row.id), null, await routedEvents(row.id), { windowSeconds });
      if (problems.length > 0) report.push(`${row.id} (${row.what}):\n  ${problems.join('\n  ')}`);
      expect.soft(problems, `${row.id}: ${row.what}`).toEqual([]);
    }
    const healthy = healthyProblems(started.healthy, await routedEvents('healthy'));
    expect.soft(healthy, 'the healthy webhook beside them').toEqual([]);
    expect.soft(exit, 'exit status on SIGTERM').toBe(0);
    if (report.length > 0 || healthy.length > 0)
      process.stderr.write(
        `honorRetryAfter, rows that failed:\n${report.join('\n')}\nhealthy: ${healthy.join('; ') || 'ok'}\n` +
          `load average ${os
            .loadavg()
            .map((load) => load.toFixed(1))
            .join(' ')} on ${os.availableParallelism()} cores\n` +
          `run's warnings and errors (first 20):\n${troubleLines(run.output.stderr).slice(0, 20).join('\n')}\n`,
      );
  },
);
