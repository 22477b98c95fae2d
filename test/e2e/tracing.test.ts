import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * Tracing through a real `run` process: the DAM's transaction sets
 * asset_webhooks.traceparent, the capture stores it, and the spans the
 * process sends to a real OTLP/HTTP endpoint (this file's server, which reads
 * the exporter's JSON) link the delivery attempt to it; the receiver gets
 * the attempt's span as its traceparent.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

/** One span as OTLP/JSON carries it (the fields read here). */
interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes?: ReadonlyArray<{ key: string; value: Record<string, unknown> }>;
  readonly links?: ReadonlyArray<{
    traceId: string;
    spanId: string;
    attributes?: ReadonlyArray<{ key: string; value: Record<string, unknown> }>;
  }>;
}

interface OtlpEndpoint {
  readonly url: string;
  readonly spans: OtlpSpan[];
  readonly paths: string[];
  close(): Promise<void>;
}

/** A real OTLP/HTTP endpoint on 127.0.0.1 that keeps every span posted to /v1/traces. */
async function startOtlpEndpoint(): Promise<OtlpEndpoint> {
  const spans: OtlpSpan[] = [];
  const paths: string[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      paths.push(`${request.method} ${request.url} ${request.headers['content-type']}`);
      if (request.method === 'POST' && request.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
        };
        for (const resource of body.resourceSpans ?? [])
          for (const scope of resource.scopeSpans ?? []) spans.push(...(scope.spans ?? []));
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    paths,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function attribute(span: OtlpSpan, key: string): unknown {
  const value = span.attributes?.find((entry) => entry.key === key)?.value;
  if (value === undefined) return undefined;
  const [only] = Object.values(value);
  // OTLP/JSON may carry a 64-bit integer as a string.
  return 'intValue' in value ? Number(only) : only;
}

function traceparent(): { header: string; traceId: string; spanId: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/** One transaction of the DAM's application that names its trace context, as docs/writing-a-binding.md shows. */
async function inTracedTransaction(setting: string, statement: string): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query('begin');
    await client.query("select set_config('asset_webhooks.traceparent', $1, true)", [setting]);
    await client.query(statement);
    await client.query('commit');
  } finally {
    client.release();
  }
}

let receiver: TestReceiver;
let otlp: OtlpEndpoint;
const runs: CliProcess[] = [];

beforeEach(async () => {
  await resetData(db.pool);
  [receiver, otlp] = await Promise.all([startTestReceiver(), startOtlpEndpoint()]);
});
afterEach(async () => {
  for (const run of runs.splice(0)) await stopRun(run);
  await Promise.all([receiver.close(), otlp.close()]);
});

async function startService(env: NodeJS.ProcessEnv): Promise<CliProcess> {
  const file = path.join(tempDirectory('aw-tracing-'), 'config.yaml');
  writeFileSync(file, receiverConfig([{ id: 'crm', url: receiver.url, batchSize: 10, concurrency: 1 }]));
  const run = startRun({ databaseUrl: db.url, configFile: file, env });
  runs.push(run);
  await untilRunning(run);
  return run;
}

const TRACEPARENT_HEADER = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

it('links the delivery span to the contexts of the DAM transactions, and the receiver gets the attempt as its parent', async () => {
  const created = traceparent();
  const firstEdit = traceparent();
  const lastEdit = traceparent();
  // Written before the service starts, so that one run coalesces them all:
  // the first edit is collapsed into the last, and its context still counts.
  await inTracedTransaction(created.header, 'insert into assets (asset_id) values (1)');
  await inTracedTransaction(firstEdit.header, "update assets set title = 'one' where asset_id = 1");
  await inTracedTransaction(lastEdit.header, "update assets set title = 'two' where asset_id = 1");
  // Not a traceparent: stored as null, and the write is not disturbed.
  await inTracedTransaction('not-a-traceparent', 'insert into assets (asset_id) values (2)');
  await inTracedTransaction(created.header.toUpperCase(), 'insert into assets (asset_id) values (3)');
  await inTracedTransaction(`00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`, 'insert into assets (asset_id) values (4)');
  // Set in an earlier transaction of the same session only: nothing carries over.
  await db.pool.query('insert into assets (asset_id) values (5)');
  const { rows: captured } = await db.pool.query<{ asset_id: string; event_type: string; traceparent: string | null }>(
    'select asset_id::text, event_type::text, traceparent from asset_webhooks.outbox order by seq',
  );
  // The capture keeps what has a traceparent's length; the coalescer keeps only the valid form.
  expect(captured).toEqual([
    { asset_id: '1', event_type: 'CREATED', traceparent: created.header },
    { asset_id: '1', event_type: 'EDITED', traceparent: firstEdit.header },
    { asset_id: '1', event_type: 'EDITED', traceparent: lastEdit.header },
    { asset_id: '2', event_type: 'CREATED', traceparent: null },
    { asset_id: '3', event_type: 'CREATED', traceparent: created.header.toUpperCase() },
    { asset_id: '4', event_type: 'CREATED', traceparent: `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01` },
    { asset_id: '5', event_type: 'CREATED', traceparent: null },
  ]);

  const run = await startService({
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_SERVICE_NAME: 'aw-tracing-test',
  });
  await receiver.waitFor(1, 30_000);
  const header = String(receiver.requests[0]!.headers.traceparent);
  const [, traceId, parentId] = TRACEPARENT_HEADER.exec(header) ?? [];
  expect(traceId, `traceparent header ${header}`).toBeDefined();

  const attemptSpan = await eventually(
    async () => otlp.spans.find((span) => span.name === 'webhook attempt' && span.spanId === parentId),
    { timeoutMs: 20_000, what: "the attempt's span at the OTLP endpoint" },
  );
  const runSpan = await eventually(async () => otlp.spans.find((span) => span.name === 'coalescing run'), {
    timeoutMs: 20_000,
    what: 'the coalescing run span at the OTLP endpoint',
  });
  expect(otlp.paths.every((line) => line.startsWith('POST /v1/traces application/json'))).toBe(true);
  expect(attemptSpan.traceId).toBe(traceId);
  expect(attemptSpan.kind).toBe(3); // SPAN_KIND_CLIENT
  expect(attribute(attemptSpan, 'asset_webhooks.webhook.id')).toBe('crm');
  expect(attribute(attemptSpan, 'asset_webhooks.attempt')).toBe(1);
  expect(attribute(attemptSpan, 'http.response.status_code')).toBe(200);
  expect(attribute(attemptSpan, 'asset_webhooks.outcome')).toBe('delivered');
  const { rows: payloadRows } = await db.pool.query<{ payload_id: string }>(
    'select payload_id::text from asset_webhooks.payloads',
  );
  expect(payloadRows).toHaveLength(1);
  expect(attribute(attemptSpan, 'asset_webhooks.payload.id')).toBe(Number(payloadRows[0]!.payload_id));
  // Nothing of the webhook's address or keys is in the span.
  expect(JSON.stringify(attemptSpan)).not.toContain(receiver.url);

  // Linked to each DAM transaction whose change the payload carries, the collapsed edit's too, and to the run.
  const links = (attemptSpan.links ?? []).map((link) => `${link.traceId}-${link.spanId}`);
  expect(new Set(links)).toEqual(
    new Set([
      `${created.traceId}-${created.spanId}`,
      `${firstEdit.traceId}-${firstEdit.spanId}`,
      `${lastEdit.traceId}-${lastEdit.spanId}`,
      `${runSpan.traceId}-${runSpan.spanId}`,
    ]),
  );
  expect(attribute(runSpan, 'asset_webhooks.events')).toBe(7);
  expect(attribute(runSpan, 'asset_webhooks.payloads')).toBe(1);
  expect(attribute(runSpan, 'asset_webhooks.route.collapsed')).toBe(1);
  expect(attribute(runSpan, 'asset_webhooks.exclusions')).toBe(0);
  const { rows: runRows } = await db.pool.query<{ traceparent: string }>(
    'select traceparent from asset_webhooks.coalesce_runs where traceparent is not null',
  );
  expect(runRows).toEqual([{ traceparent: `00-${runSpan.traceId}-${runSpan.spanId}-01` }]);

  const { rows: events } = await db.pool.query<{ asset_id: string; traceparent: string | null }>(
    'select asset_id::text, traceparent from asset_webhooks.events order by seq',
  );
  expect(events.map((event) => event.traceparent)).toEqual([
    created.header,
    firstEdit.header,
    lastEdit.header,
    null,
    null,
    null,
    null,
  ]);

  // trace names the context of a traced event, and none for an untraced one.
  const { rows: ids } = await db.pool.query<{ event_id: string; traced: boolean }>(
    "select event_id::text, traceparent is not null as traced from asset_webhooks.events where event_type = 'CREATED' and asset_id in (1, 2) order by asset_id",
  );
  const tracedEvent = await runCli(['trace', ids[0]!.event_id, '--database-url', db.url]);
  expect(tracedEvent.stdout).toContain(
    `captured with trace context ${created.header}: its delivery attempts' spans link to it`,
  );
  const untraced = await runCli(['trace', ids[1]!.event_id, '--database-url', db.url]);
  expect(untraced.code).toBe(0);
  expect(untraced.stdout).not.toContain('trace context');

  // The attempt's log line names its trace.
  const delivered = run.output.stderr
    .split('\n')
    .filter((line) => line.includes('payload delivered'))
    .map((line) => JSON.parse(line) as { trace_id?: string });
  expect(delivered.map((line) => line.trace_id)).toEqual([traceId]);
}, 90_000);

it('sends no traceparent and loads no tracing when the OTEL variables are unset', async () => {
  const context = traceparent();
  await inTracedTransaction(context.header, 'insert into assets (asset_id) values (1)');
  const run = await startService({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_TRACES_EXPORTER: '' });
  await receiver.waitFor(1, 30_000);
  expect(receiver.requests[0]!.headers.traceparent).toBeUndefined();
  await eventually(async () => (run.output.stderr.includes('payload delivered') ? true : undefined), {
    timeoutMs: 20_000,
    what: 'the delivered log line',
  });
  expect(run.output.stderr).not.toContain('trace_id');
  expect(run.output.stderr).not.toContain('tracing on');
  // The capture stores the context whether or not the service traces.
  const { rows } = await db.pool.query<{ traceparent: string | null }>('select traceparent from asset_webhooks.events');
  expect(rows).toEqual([{ traceparent: context.header }]);
  // No span went anywhere: the endpoint was never asked.
  expect(otlp.paths).toEqual([]);
}, 60_000);

it('exports the spans still buffered when the process is stopped gracefully', async () => {
  await inTracedTransaction(traceparent().header, 'insert into assets (asset_id) values (1)');
  // An export interval longer than the test: only the stop's flush can send the spans.
  const run = await startService({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '600000' });
  await receiver.waitFor(1, 30_000);
  await eventually(async () => (run.output.stderr.includes('payload delivered') ? true : undefined), {
    timeoutMs: 20_000,
    what: 'the delivered log line',
  });
  expect(otlp.spans).toEqual([]);
  expect(await stopRun(run)).toBe(0);
  const [, traceId, spanId] = TRACEPARENT_HEADER.exec(String(receiver.requests[0]!.headers.traceparent)) ?? [];
  expect(otlp.spans.map((span) => span.name).sort()).toEqual(['coalescing run', 'webhook attempt']);
  expect(otlp.spans.find((span) => span.name === 'webhook attempt')).toMatchObject({ traceId, spanId });
}, 60_000);
