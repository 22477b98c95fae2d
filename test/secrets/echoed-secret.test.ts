import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpSender } from '../../src/delivery/http/sender.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { httpServer, type LocalServer } from '../helpers/http-servers.js';
import { eventually } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * A receiver may echo what it was sent: `400 bad key: <key>`, a JSON dump of
 * the request headers, a URL-encoded copy, the headers themselves. The API key
 * (and any configured header value, such as an Authorization token) must
 * never reach an attempt record, a dead letter, a log line, /metrics or a
 * command's output. KEY holds characters that JSON and URL encoding change,
 * so each encoded form is a different string; every form contains MARK, and
 * the key's first eight characters (what a cut excerpt would keep) do too.
 */
const KEY = 'sk/ECHO+LEAK"q\\7=9f2c81d0b';
const MARK = 'ECHO';
const BEARER = 'Bearer tok-ECHO-5be1c0ffee';
const FORMS = [
  KEY,
  JSON.stringify(KEY).slice(1, -1),
  encodeURIComponent(KEY),
  new URLSearchParams({ k: KEY }).toString().slice(2),
];

const tempDirectory = useTempDirectories();
const db = useTestDatabase();

/** Echoes the key in the body (as the path says) and in response headers, with the path's status. */
function echoServer(): Promise<LocalServer> {
  return httpServer((request, response) => {
    const key = String(request.headers['x-api-key'] ?? '');
    const auth = String(request.headers.authorization ?? '');
    request.resume();
    request.on('end', () => {
      const echo = { 'x-echo-key': encodeURIComponent(key), 'x-echo-auth': auth, 'content-type': 'text/plain' };
      const answers: Record<string, [number, string]> = {
        '/accepted': [200, `accepted key=${key} auth=${auth}`],
        '/rejected': [400, `bad key: ${key}`],
        '/failing': [500, JSON.stringify({ received: { headers: request.headers } })],
        '/encoded': [503, `key=${encodeURIComponent(key)}&form=${new URLSearchParams({ k: key }).toString()}`],
        // The key straddles the excerpt's limit (1024 bytes): its beginning would be kept by a cut.
        '/straddling': [502, `${'a'.repeat(1016)}${key} and more`],
      };
      const [status, body] = answers[request.url ?? ''] ?? [404, 'no such path'];
      response.writeHead(status, echo).end(body);
    });
  });
}

function expectNoSecret(where: string, text: string): void {
  expect(text, `${where} holds a form of the key`).not.toContain(MARK);
  for (const form of FORMS) expect(text, `${where} holds ${form}`).not.toContain(form);
  expect(text, `${where} holds the bearer token`).not.toContain('tok-');
}

let receiver: LocalServer;
beforeAll(async () => {
  receiver = await echoServer();
});
afterAll(async () => {
  await receiver.close();
});

describe('the sender keeps no echoed secret in an excerpt or message', () => {
  it.for(['/accepted', '/rejected', '/failing', '/encoded', '/straddling'])(
    '%s',
    async (pathName, { expect: check }) => {
      const sender = new HttpSender({ timeoutMs: 5000, allowPrivateAddresses: true });
      try {
        const result = await sender.post({
          url: `${receiver.origin}${pathName}`,
          body: '{}',
          headers: { 'X-API-Key': KEY, Authorization: BEARER },
        });
        check(result.kind).toBe('response');
        if (result.kind !== 'response') return;
        expectNoSecret(pathName, result.responseExcerpt);
        check(result.responseExcerpt).toContain('[redacted]');
        check(Buffer.byteLength(result.responseExcerpt)).toBeLessThanOrEqual(1024 + '[redacted]'.length);
      } finally {
        await sender.close();
      }
    },
  );

  it('keeps what is not a secret', async () => {
    const sender = new HttpSender({ timeoutMs: 5000, allowPrivateAddresses: true });
    try {
      const result = await sender.post({
        url: `${receiver.origin}/rejected`,
        body: '{}',
        headers: { 'X-API-Key': KEY },
      });
      expect(result).toMatchObject({ kind: 'response', statusCode: 400, responseExcerpt: 'bad key: [redacted]' });
    } finally {
      await sender.close();
    }
  });
});

describe('a run against receivers that echo the key leaves it nowhere', () => {
  let service: CliProcess | undefined;
  afterAll(async () => {
    service?.child.kill('SIGKILL');
    await service?.exited;
  });

  it('not in the database, the debug log, /metrics, trace, events or dead-letters', async () => {
    await resetData(db.pool);
    const paths = ['accepted', 'rejected', 'failing', 'encoded', 'straddling'];
    const file = path.join(tempDirectory('aw-echo-'), 'config.yaml');
    writeFileSync(
      file,
      receiverConfig(
        paths.map((name) => ({
          id: name,
          url: `${receiver.origin}/${name}`,
          apikey: 'crm-key',
          headers: { Authorization: BEARER },
        })),
        { requestTimeoutSeconds: 5, retry: { delaysSeconds: [1] } },
      ),
    );
    const port = await freePort();
    service = startCli(['run', '--database-url', db.url, '--config', file, '--http-port', String(port)], {
      env: {
        LOG_LEVEL: 'debug',
        ASSET_WEBHOOKS_SECRET_CRM_KEY: KEY,
      },
    });
    const started = new Date(Date.now() - 60_000);
    await db.pool.query('insert into assets (asset_id) values (1)');
    // accepted delivers; rejected is dead-lettered at once; the others after their one retry.
    await eventually(
      async () => {
        const {
          rows: [row],
        } = await db.pool.query<{ done: string }>(
          `select count(*) filter (where status in ('delivered', 'dead_lettered')) as done from asset_webhooks.payloads`,
        );
        return Number(row!.done) === paths.length ? true : undefined;
      },
      { timeoutMs: 60_000, what: 'every payload delivered or dead-lettered' },
    );
    const {
      rows: [attempts],
    } = await db.pool.query<{ n: string; excerpts: string }>(
      "select count(*) as n, string_agg(response_excerpt, ' ') as excerpts from asset_webhooks.attempts",
    );
    expect(Number(attempts!.n)).toBeGreaterThanOrEqual(paths.length);
    expect(attempts!.excerpts).toContain('[redacted]');

    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain('asset_webhooks_delivery_attempts_total');
    expectNoSecret('/metrics', metrics);

    // Every table of every schema the service writes, as text.
    const { rows: tables } = await db.pool.query<{ name: string }>(
      `select format('%I.%I', table_schema, table_name) as name from information_schema.tables
       where table_schema not in ('pg_catalog', 'information_schema') and table_type = 'BASE TABLE'`,
    );
    expect(tables.map((table) => table.name)).toEqual(
      expect.arrayContaining(['asset_webhooks.attempt_log', 'asset_webhooks.payloads']),
    );
    for (const { name } of tables) {
      const {
        rows: [dump],
      } = await db.pool.query<{ text: string | null }>(`select string_agg(t::text, E'\\n') as text from ${name} t`);
      expectNoSecret(name, dump!.text ?? '');
    }

    const { rows: events } = await db.pool.query<{ event_id: string }>('select event_id from asset_webhooks.events');
    expect(events.length).toBeGreaterThan(0);
    const outputs = [
      ...(await Promise.all(
        events.flatMap(({ event_id: id }) => [
          runCli(['trace', id, '--database-url', db.url]),
          runCli(['trace', id, '--json', '--database-url', db.url]),
        ]),
      )),
      await runCli(['dead-letters', '--database-url', db.url]),
      await runCli(['dead-letters', '--json', '--database-url', db.url]),
      await runCli([
        'events',
        '--from',
        started.toISOString(),
        '--to',
        new Date(Date.now() + 60_000).toISOString(),
        '--database-url',
        db.url,
      ]),
      await runCli([
        'events',
        '--from',
        started.toISOString(),
        '--to',
        new Date(Date.now() + 60_000).toISOString(),
        '--json',
        '--database-url',
        db.url,
      ]),
    ];
    for (const output of outputs) {
      expect(output.code).toBe(0);
      expectNoSecret('command output', output.stdout + output.stderr);
    }

    service.child.kill('SIGTERM');
    await service.exited;
    expect(service.output.stdout + service.output.stderr).toMatch(/"level":20/);
    expectNoSecret('the debug log', service.output.stdout + service.output.stderr);
    // A run, then a dozen commands, each a process of its own.
  }, 180_000);
});
