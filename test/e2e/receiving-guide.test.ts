import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually } from '../helpers/receiver.js';
import { untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * Every receiver example of docs/receiving.md, started as the guide says,
 * against real signed deliveries of a real `run` process: signatures
 * verified, a payload received again (a 2xx that did not reach the service,
 * an operator's redelivery) ignored by its webhook-id, events deduplicated by
 * eventId, and the copy kept by the guide's rule (apply an event only when
 * its eventTimestamp is greater than the one held). A test-owned front
 * forwards each request to the example, one at a time, and decides what the
 * service is answered; what the example prints for each request is compared
 * with the guide's rule applied, in this file, to the same requests.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const KEY = `whsec_${randomBytes(32).toString('base64')}`;
const SIGNING = { secret: 'guide-signing' };
const SECRET_ENV = { ASSET_WEBHOOKS_SECRET_GUIDE_SIGNING: KEY };

interface Example {
  readonly name: string;
  readonly file: string;
  /** The command the guide gives, with the example's path appended. */
  readonly command: readonly string[];
}

const examples: readonly Example[] = [
  { name: 'Node.js', file: 'receiver-node.mjs', command: [process.execPath] },
  // python3 from PATH, as the guide says; a machine without it fails here, it does not skip.
  { name: 'Python', file: 'receiver-python.py', command: ['python3'] },
];

const started: Array<{ child: ChildProcess } | CliProcess> = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const { child } of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

interface RunningExample {
  readonly port: number;
  /** What it printed for each request: its `accepted`, `ignored` and `refused` lines, in order. */
  lines(): string[];
  output(): string;
}

/** Starts an example exactly as the guide says (WEBHOOK_SECRET, PORT), on a free port. */
async function startExample(example: Example): Promise<RunningExample> {
  const [command, ...args] = example.command;
  const file = fileURLToPath(new URL(`../../docs/examples/${example.file}`, import.meta.url));
  const child = spawn(command!, [...args, file], {
    env: { ...process.env, WEBHOOK_SECRET: KEY, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push({ child });
  let output = '';
  let spawnError: Error | undefined;
  child.on('error', (error) => (spawnError = error));
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const port = await eventually(
    async () => {
      if (spawnError) throw new Error(`expected \`${command}\` to start ${example.file}, got ${spawnError.message}`);
      if (child.exitCode !== null) throw new Error(`${example.file} exited (${child.exitCode}):\n${output}`);
      return /listening on (\d+)/.exec(output)?.[1];
    },
    { timeoutMs: 10_000, what: `${example.file} to listen` },
  );
  return {
    port: Number(port),
    output: () => output,
    lines: () => output.split('\n').filter((line) => /^(accepted|ignored|refused)\b/.test(line)),
  };
}

interface Forwarded {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** What the example answered. */
  readonly status: number;
}

/**
 * The front's answer to a request: the example's ('pass'), or another status.
 * `payload`: the position of its webhook-id among those that came to its path
 * (0: the first payload), `arrival`: how often that webhook-id has come (1: the first time).
 */
type Policy = (request: { path: string; payload: number; arrival: number }) => number | 'pass';

interface Front {
  readonly url: string;
  readonly forwarded: Forwarded[];
}

/**
 * An HTTP server in front of the example: forwards every POST to it, one at
 * a time in the order they arrive (so the example's lines follow that order),
 * and answers the sender as `policy` says.
 */
async function startFront(examplePort: number, policy: Policy): Promise<Front> {
  const forwarded: Forwarded[] = [];
  const webhookIds = new Map<string, string[]>();
  let turn: Promise<unknown> = Promise.resolve();
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      turn = turn.then(async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const headers = Object.fromEntries(
          ['content-type', 'webhook-id', 'webhook-timestamp', 'webhook-signature'].flatMap((name) => {
            const value = request.headers[name];
            return typeof value === 'string' ? [[name, value]] : [];
          }),
        );
        const answer = await fetch(`http://127.0.0.1:${examplePort}${request.url}`, {
          method: 'POST',
          headers,
          body,
        });
        await answer.arrayBuffer();
        forwarded.push({ path: request.url ?? '', headers: request.headers, body, status: answer.status });
        const at = request.url ?? '';
        const webhookId = String(request.headers['webhook-id']);
        const ids = webhookIds.get(at) ?? [];
        if (!ids.includes(webhookId)) ids.push(webhookId);
        webhookIds.set(at, ids);
        const decided = policy({
          path: at,
          payload: ids.indexOf(webhookId),
          arrival: forwarded.filter((f) => f.path === at && f.headers['webhook-id'] === webhookId).length,
        });
        response.writeHead(decided === 'pass' ? answer.status : decided).end();
      });
      // An example that cannot be reached is a 502 to the sender, and the next request still goes.
      turn = turn.catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(502).end(String(error));
      });
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, forwarded };
}

interface Event {
  readonly atomId: number | null;
  readonly eventId: string;
  readonly eventTimestamp: string;
  readonly assetId: number;
  readonly assetUuid: string;
  readonly eventType: string;
}

/** The guide's rule, applied here to the requests as the example got them: what it must print, and the copy it must keep. */
function byTheGuide(requests: readonly Forwarded[]): {
  lines: string[];
  copy: Map<string, { at: string; state: string }>;
} {
  const verifier = new Webhook(KEY);
  const webhookIds = new Set<string>();
  const eventIds = new Set<string>();
  const copy = new Map<string, { at: string; state: string }>();
  const lines = requests.map(({ headers, body }) => {
    let payload: { count: number; events: Event[] };
    try {
      payload = verifier.verify(body, {
        'webhook-id': String(headers['webhook-id']),
        'webhook-timestamp': String(headers['webhook-timestamp']),
        'webhook-signature': String(headers['webhook-signature']),
      }) as typeof payload;
    } catch {
      return 'refused: no valid signature';
    }
    const webhookId = String(headers['webhook-id']);
    if (webhookIds.has(webhookId)) return `ignored ${webhookId}: received before`;
    webhookIds.add(webhookId);
    const results = payload.events.map((event) => {
      if (eventIds.has(event.eventId)) return 'duplicate';
      eventIds.add(event.eventId);
      const held = copy.get(event.assetUuid);
      if (held !== undefined && !(Date.parse(event.eventTimestamp) > Date.parse(held.at))) return 'older';
      const state =
        event.eventType === 'PURGED' || event.eventType === 'UNMATCHED'
          ? 'removed'
          : event.eventType === 'DELETED'
            ? 'archived'
            : 'upserted';
      copy.set(event.assetUuid, { at: event.eventTimestamp, state });
      return state;
    });
    return `accepted ${webhookId} with ${payload.count} events: ${results.join(',')}`;
  });
  return { lines, copy };
}

/** A request signed with the webhook's key, as the service signs one. */
function signed(webhookId: string, events: readonly Event[]): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify({ count: events.length, events, webhookTimestamp: new Date().toISOString() });
  const now = new Date();
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': webhookId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(KEY).sign(webhookId, now, body),
    },
  };
}

/** Resolves once `count` payloads exist and each is delivered or dead-lettered. */
async function settled(count: number): Promise<void> {
  await eventually(
    async () => {
      const { rows } = await db.pool.query<{ n: number; open: number }>(
        `select count(*)::int as n, count(*) filter (where status in ('open', 'pending'))::int as open from asset_webhooks.payloads`,
      );
      return rows[0]!.n === count && rows[0]!.open === 0 ? true : undefined;
    },
    { timeoutMs: 30_000, what: `${count} payloads delivered or dead-lettered` },
  );
}

/**
 * The lines of code of a fenced block, each trimmed and without its trailing
 * comment or leading declaration keyword; comment-only and blank lines dropped.
 */
function codeLines(code: string, comment: string): string[] {
  return code
    .split('\n')
    .map((line) =>
      line
        .split(` ${comment} `)[0]!
        .trim()
        .replace(/^(const|let) /, ''),
    )
    .filter((line) => line !== '' && !line.startsWith(comment));
}

describe('docs/receiving.md', () => {
  it.each([
    ['js', 'receiver-node.mjs', '//'],
    ['python', 'receiver-python.py', '#'],
  ])('shows, in its %s verification snippet, the code of %s it links, line for line', (language, file, comment) => {
    const guide = readFileSync(fileURLToPath(new URL('../../docs/receiving.md', import.meta.url)), 'utf8');
    const section = guide.slice(
      guide.indexOf('## Verifying a delivery'),
      guide.indexOf('\n## ', guide.indexOf('## Verifying a delivery') + 1),
    );
    const blocks = [...section.matchAll(new RegExp(`^\`\`\`${language}\n([\\s\\S]*?)^\`\`\`$`, 'gm'))];
    expect(blocks).toHaveLength(1);
    expect(section).toContain(`(examples/${file})`);
    const example = new Set(
      codeLines(readFileSync(fileURLToPath(new URL(`../../docs/examples/${file}`, import.meta.url)), 'utf8'), comment),
    );
    const snippet = codeLines(blocks[0]![1]!, comment);
    expect(snippet.length).toBeGreaterThan(2);
    expect(snippet.filter((line) => !example.has(line))).toEqual([]);
  });
});

describe.each(examples)("docs/receiving.md's $name receiver", (example) => {
  it('verifies real deliveries, ignores a payload it got before by webhook-id and an event by eventId, and keeps the copy by the eventTimestamp rule', async () => {
    await resetData(db.pool);
    const receiver = await startExample(example);
    // /guide: the example's 2xx to the first payload is lost (503: the service sends it again),
    // and the second payload is answered 400 (dead-lettered; an operator redelivers it).
    const front = await startFront(receiver.port, ({ path: at, payload, arrival }) => {
      if (at !== '/guide' || arrival !== 1) return 'pass';
      return payload === 0 ? 503 : payload === 1 ? 400 : 'pass';
    });
    const file = path.join(tempDirectory('aw-guide-'), 'config.yaml');
    writeFileSync(
      file,
      receiverConfig(
        [
          { id: 'guide', url: `${front.url}/guide`, signing: SIGNING },
          // A second webhook to the same receiver: the same events under other webhook-ids.
          { id: 'twin', url: `${front.url}/twin`, signing: SIGNING },
        ],
        { retry: { delaysSeconds: [1, 1, 1] } },
      ),
    );
    const run = startCli(['run', '--database-url', db.url, '--config', file], { env: SECRET_ENV });
    started.push(run);
    await untilRunning(run);

    const { rows: uuids } = await db.pool.query<{ asset_uuid: string }>(
      'insert into assets (asset_id) values (1), (2) returning asset_uuid',
    );
    const [asset1, asset2] = uuids.map((row) => row.asset_uuid) as [string, string];
    await settled(2);
    // One statement: one coalescing run, one payload per webhook.
    await db.pool.query(
      `update assets set title = case asset_id when 1 then 'edited' else title end,
                         trashed_at = case asset_id when 2 then now() else trashed_at end
       where asset_id in (1, 2)`,
    );
    await settled(4);
    const { rows: deadLetters } = await db.pool.query<{ payload_id: number }>(
      `select payload_id from asset_webhooks.dead_letters where webhook_id = 'guide'`,
    );
    expect(deadLetters).toHaveLength(1);
    const redelivered = await runCli([
      'dead-letters',
      'redeliver',
      String(deadLetters[0]!.payload_id),
      '--database-url',
      db.url,
    ]);
    expect(redelivered.code, redelivered.stderr).toBe(0);
    await settled(4);
    await db.pool.query('delete from assets where asset_id = 1');
    await settled(6);
    const { rows: undelivered } = await db.pool.query(
      `select payload_id from asset_webhooks.payloads where status <> 'delivered'`,
    );
    expect(undelivered).toEqual([]);

    // Requests the service would not make today, signed with the same key: an
    // EDITED of asset 2 at the time held for it, one older, and one newer; and one forged.
    const held = byTheGuide(front.forwarded).copy;
    const at = Date.parse(held.get(asset2)!.at);
    const edited = (ms: number): Event => ({
      atomId: null,
      eventId: randomUUID(),
      eventTimestamp: new Date(ms).toISOString(),
      assetId: 2,
      assetUuid: asset2,
      eventType: 'EDITED',
    });
    for (const [name, events] of [
      ['msg_same_time', [edited(at)]],
      ['msg_older', [edited(at - 1)]],
      ['msg_newer', [edited(at + 1)]],
    ] as const) {
      const request = signed(name, events);
      const answer = await fetch(`${front.url}/crafted`, { method: 'POST', ...request });
      expect(answer.status, name).toBe(204);
    }
    const forged = signed('msg_forged', [edited(at + 2)]);
    forged.headers['webhook-signature'] = `v1,${randomBytes(32).toString('base64')}`;
    expect((await fetch(`${front.url}/crafted`, { method: 'POST', ...forged })).status).toBe(401);

    // Every real delivery's signature verified (a 2xx from the example), whatever the sender was told.
    expect(front.forwarded.filter((f) => f.path !== '/crafted' && f.status !== 204)).toEqual([]);
    const expected = byTheGuide(front.forwarded);
    // One line per request; if one never comes, the comparison below shows which.
    const deadline = Date.now() + 10_000;
    while (receiver.lines().length < front.forwarded.length && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    const lines = receiver.lines();
    expect(lines).toEqual(expected.lines);

    // The run covered what the guide promises the examples handle.
    const guideIds = [
      ...new Set(front.forwarded.filter((f) => f.path === '/guide').map((f) => f.headers['webhook-id'])),
    ];
    expect(guideIds.length).toBe(3);
    const ignored = lines.filter((line) => line.startsWith('ignored '));
    // The payload whose 2xx was lost, and the one an operator redelivered.
    expect(ignored).toEqual([`ignored ${guideIds[0]}: received before`, `ignored ${guideIds[1]}: received before`]);
    expect(lines.join('\n')).toMatch(/duplicate/);
    expect(
      lines.filter((line) => line.startsWith('accepted msg_same_time') || line.startsWith('accepted msg_older')),
    ).toEqual(['accepted msg_same_time with 1 events: older', 'accepted msg_older with 1 events: older']);
    expect(lines).toContain('accepted msg_newer with 1 events: upserted');
    expect(lines.filter((line) => line.startsWith('refused'))).toHaveLength(1);
    expect(expected.copy.get(asset1)?.state).toBe('removed');
    expect(expected.copy.get(asset2)).toEqual({ at: new Date(at + 1).toISOString(), state: 'upserted' });
  }, 90_000);

  it('removes an asset from its copy when a mirror webhook sends UNMATCHED', async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.mirror_members');
    const receiver = await startExample(example);
    const file = path.join(tempDirectory('aw-guide-'), 'config.yaml');
    writeFileSync(
      file,
      receiverConfig([
        {
          id: 'guide-copy',
          url: `http://127.0.0.1:${receiver.port}/asset-events`,
          signing: SIGNING,
          mirror: true,
          filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['shop'] }],
        },
      ]),
    );
    started.push(startCli(['run', '--database-url', db.url, '--config', file], { env: SECRET_ENV }));
    const results = (): string =>
      receiver
        .lines()
        .map((line) => line.replace(/^.*events: /, ''))
        .join(',');
    await db.pool.query('insert into assets (asset_id) values (1)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
    await eventually(async () => (results().includes('upserted') ? true : undefined), {
      timeoutMs: 20_000,
      what: `the example to upsert the asset; it printed: ${receiver.output()}`,
    });
    await db.pool.query("delete from asset_keywords where asset_id = 1 and value = 'shop'");
    await eventually(async () => (results().endsWith('removed') ? true : undefined), {
      timeoutMs: 20_000,
      what: `the example to remove the asset on UNMATCHED; it printed: ${receiver.output()}`,
    });
    // Verified and applied: every payload accepted, the asset upserted until the last, which removed it.
    expect(receiver.lines().filter((line) => !line.startsWith('accepted '))).toEqual([]);
    const applied = results().split(',');
    expect(applied.at(-1)).toBe('removed');
    expect(new Set(applied.slice(0, -1))).toEqual(new Set(['upserted']));
    // The removal is the UNMATCHED the service delivered, for the asset that left the set.
    // (Its outcome may still read pending: the example answers before the service records the 2xx.)
    const { rows } = await db.pool.query<{ event_type: string; asset_id: string }>(
      `select event_type, asset_id::text from asset_webhooks.event_outcomes
       where webhook_id = 'guide-copy' and sent_as = 'UNMATCHED'`,
    );
    expect(rows).toEqual([{ event_type: 'EDITED', asset_id: '1' }]);
  });
});
