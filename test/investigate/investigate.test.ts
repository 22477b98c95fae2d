import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { openWebhook, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const runbooks = fileURLToPath(new URL('../../sql/runbooks/', import.meta.url));
let ids: { delivered: string; excluded: string; collapsed: string; dead: string; waiting: string; deadPayload: number };

async function eventOf(assetId: number, type: string, table = 'asset_webhooks.events'): Promise<string> {
  const { rows } = await db.pool.query<{ event_id: string }>(
    `select event_id from ${table} where asset_id = $1 and event_type = $2 order by seq limit 1`,
    [assetId, type],
  );
  return rows[0]!.event_id;
}

beforeAll(async () => {
  await resetData(db.pool);
  const crm = openWebhook('crm', { batchSize: 1 });
  const shop = openWebhook('shop', { filters: [{ filterKind: 'state', condition: 'NONE', value: ['draft'] }] });
  await registerWebhooks(db.pool, [crm, shop]);
  await db.pool.query("insert into assets (asset_id, state) values (1, null), (2, 'draft')");
  await db.pool.query("update assets set title = 'a' where asset_id = 1");
  await db.pool.query("update assets set title = 'b' where asset_id = 1");
  await runCoalesce(db.pool, [crm, shop]);
  // Simulate delivery: crm's first payload delivered after one failure, the second dead-lettered as rejected.
  const { rows: payloads } = await db.pool.query<{ payload_id: number }>(
    "select payload_id from asset_webhooks.payloads where webhook_id = 'crm' order by payload_id",
  );
  await db.pool.query(
    `insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at, duration_ms, status_code, error_class, error_message, outcome) values
    ($1, 1, 1, now() - interval '2 minutes', 12, null, 'connection_refused', 'connect ECONNREFUSED', 'retry'),
    ($1, 1, 2, now() - interval '1 minute', 8, 200, null, null, 'delivered'),
    ($2, 1, 1, now(), 5, 422, null, null, 'rejected')`,
    [payloads[0]!.payload_id, payloads[1]!.payload_id],
  );
  await db.pool.query(
    "update asset_webhooks.payloads set status = 'delivered', delivered_at = now(), attempts = 2 where payload_id = $1",
    [payloads[0]!.payload_id],
  );
  await db.pool.query(
    "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected', dead_lettered_at = now(), attempts = 1, last_status_code = 422 where payload_id = $1",
    [payloads[1]!.payload_id],
  );
  await db.pool.query('insert into assets (asset_id) values (3)');
  ids = {
    delivered: await eventOf(1, 'CREATED'),
    dead: await eventOf(2, 'CREATED'),
    excluded: await eventOf(2, 'CREATED'),
    collapsed: await eventOf(1, 'EDITED'),
    waiting: await eventOf(3, 'CREATED', 'asset_webhooks.waiting_events'),
    deadPayload: payloads[1]!.payload_id,
  };
});

describe('trace', () => {
  it("escapes a receiver's error text that would colour the terminal and forge a line", async () => {
    const forged = 'connect ECONNREFUSED\u001b[2J\n    attempt 9 HTTP 200 delivered\u009b';
    await db.pool.query(
      "update asset_webhooks.attempt_log set error_message = $1 where error_message = 'connect ECONNREFUSED'",
      [forged],
    );
    try {
      const result = await runCli(['trace', ids.delivered, '--database-url', db.url]);
      expect(result.code).toBe(0);
      expect(result.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
      expect(result.stdout).toContain('connect ECONNREFUSED\\e[2J\\n    attempt 9 HTTP 200 delivered\\u009b');
      expect(result.stdout.split('\n').filter((line) => line.includes('attempt 9'))).toHaveLength(1);
    } finally {
      await db.pool.query(
        "update asset_webhooks.attempt_log set error_message = 'connect ECONNREFUSED' where error_message = $1",
        [forged],
      );
    }
  });

  it('answers "did crm get it": the payload, every attempt, delivered', async () => {
    const result = await runCli(['trace', ids.delivered, '--database-url', db.url]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/crm: in payload \d+ \(1 events, created .*\): delivered at/);
    expect(result.stdout).toMatch(/attempt 1 at .*: connection_refused: connect ECONNREFUSED in 12 ms -> retry/);
    expect(result.stdout).toMatch(/attempt 2 at .*: HTTP 200 in 8 ms -> delivered/);
  });

  it('names the check that excluded an event, and a dead letter with how to redeliver it', async () => {
    const result = await runCli(['trace', ids.excluded, '--database-url', db.url]);
    expect(result.stdout).toMatch(/shop: not sent, excluded by filter:1 \(filter group 1 of the webhook did not pass/);
    expect(result.stdout).toMatch(
      new RegExp(
        `crm: in payload ${ids.deadPayload} .*DEAD-LETTERED \\(rejected\\); redeliver with: asset-webhooks dead-letters redeliver ${ids.deadPayload}`,
      ),
    );
  });

  it('says which event a collapsed edit went into', async () => {
    const result = await runCli(['trace', ids.collapsed, '--database-url', db.url]);
    expect(result.stdout).toMatch(/crm: not sent on its own, collapsed into the later edit [0-9a-f-]{36}/);
  });

  it('shows an event not yet coalesced as captured and waiting', async () => {
    const result = await runCli(['trace', ids.waiting, '--database-url', db.url]);
    expect(result.stdout).toContain('captured, waiting for the next coalescing run');
  });

  it('gives JSON with --json', async () => {
    const result = await runCli(['trace', ids.delivered, '--json', '--database-url', db.url]);
    const trace = JSON.parse(result.stdout) as { state: string; routes: Array<{ webhookId: string; outcome: string }> };
    expect(trace.state).toBe('coalesced');
    expect(trace.routes.map((r) => [r.webhookId, r.outcome])).toEqual([
      ['crm', 'delivered'],
      ['shop', 'pending'],
    ]);
  });

  it('refuses an unknown event id (exit 1) and bad usage (exit 2)', async () => {
    const unknown = await runCli(['trace', '00000000-0000-4000-8000-000000000000', '--database-url', db.url]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^event 00000000-0000-4000-8000-000000000000: expected an eventId/);
    expect((await runCli(['trace'])).code).toBe(2);
  });
});

describe('events in a window', () => {
  it('lists the events with their outcome per webhook, and those still waiting', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const result = await runCli(['events', '--from', from, '--to', to, '--asset', '2', '--database-url', db.url]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /CREATED\s+asset 2\n\s+crm: dead_lettered payload \d+\n\s+shop: excluded \(filter:1\)/,
    );
    const json = JSON.parse(
      (await runCli(['events', '--from', from, '--to', to, '--webhook', 'crm', '--json', '--database-url', db.url]))
        .stdout,
    ) as Array<{ assetId: number; waiting: boolean }>;
    expect(json.map((e) => [e.assetId, e.waiting])).toEqual([
      [1, false],
      [2, false],
      [1, false],
      [1, false],
      [3, true],
    ]);
  });
});

describe('the command line refuses what it cannot answer', () => {
  const window = (): string[] => [
    '--from',
    new Date(Date.now() - 3_600_000).toISOString(),
    '--to',
    new Date(Date.now() + 60_000).toISOString(),
  ];

  it('reads a time without an offset as UTC, whatever the local zone, and honours an offset', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const withZ = await runCli(['events', '--from', from, '--to', to, '--json', '--database-url', db.url]);
    const noOffset = await runCli(
      ['events', '--from', from.slice(0, -1), '--to', to.slice(0, -1), '--json', '--database-url', db.url],
      { env: { TZ: 'America/New_York' } },
    );
    // The same instant written in UTC+02:00.
    const shifted = (iso: string): string =>
      `${new Date(Date.parse(iso) + 7_200_000).toISOString().slice(0, -1)}+02:00`;
    const withOffset = await runCli(
      ['events', '--from', shifted(from), '--to', shifted(to), '--json', '--database-url', db.url],
      { env: { TZ: 'Asia/Tokyo' } },
    );
    expect(JSON.parse(withZ.stdout)).not.toHaveLength(0);
    expect(noOffset.stdout).toBe(withZ.stdout);
    expect(withOffset.stdout).toBe(withZ.stdout);
  });

  it('refuses an impossible date, a window that ends before it starts (exit 2) and an unknown webhook (exit 1)', async () => {
    for (const bad of [
      '2026-02-30',
      '2026-11-31T00:00:00Z',
      '2026-11-22T24:00:00Z',
      '2026-11-22T09:00:00+25:00',
      'yesterday',
    ]) {
      const result = await runCli(['events', '--from', bad, '--to', '2026-12-01T00:00:00Z', '--database-url', db.url]);
      expect({ bad, code: result.code }).toEqual({ bad, code: 2 });
      expect(result.stderr).toContain(
        `--from: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got ${JSON.stringify(bad)}`,
      );
    }
    const backwards = await runCli([
      'events',
      '--from',
      '2026-11-24T00:00:00Z',
      '--to',
      '2026-11-23T00:00:00Z',
      '--database-url',
      db.url,
    ]);
    expect(backwards.code).toBe(2);
    expect(backwards.stderr).toBe(
      'error: --from: expected a time before --to (2026-11-23T00:00:00.000Z), got 2026-11-24T00:00:00.000Z (run with --help for usage)\n',
    );
    for (const command of [['events', ...window()], ['dead-letters']]) {
      const unknown = await runCli([...command, '--webhook', 'nosuch', '--database-url', db.url]);
      expect({ command, code: unknown.code, stderr: unknown.stderr }).toEqual({
        command,
        code: 1,
        stderr: '--webhook: expected the id of a webhook the service has run with (crm, shop), got "nosuch"\n',
      });
    }
  });

  it('reads an eventId in capitals, and refuses a malformed one or a malformed PAYLOAD_ID as bad usage (exit 2)', async () => {
    const upper = await runCli(['trace', ids.delivered.toUpperCase(), '--json', '--database-url', db.url]);
    expect(upper.code).toBe(0);
    expect((JSON.parse(upper.stdout) as { eventId: string }).eventId).toBe(ids.delivered);
    const malformed = await runCli(['trace', 'not-a-uuid', '--database-url', db.url]);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('EVENT_ID: expected a UUID, got "not-a-uuid"');
    for (const bad of ['abc', '0', '3.0']) {
      const result = await runCli(['dead-letters', 'redeliver', bad, '--database-url', db.url]);
      expect({ bad, code: result.code }).toEqual({ bad, code: 2 });
      expect(result.stderr).toContain(
        `PAYLOAD_ID: expected an integer from 1 to ${Number.MAX_SAFE_INTEGER}, got "${bad}"`,
      );
    }
  });

  it('refuses a --database-url that is not a PostgreSQL URL without echoing it (exit 1)', async () => {
    const result = await runCli(['dead-letters', '--database-url', 'secret-password-here']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      '--database-url: expected a URL such as postgres://user@host:5432/database or postgres://user@/database?host=/var/run/postgresql (from the option), got a value that is not a URL\n',
    );
  });
});

describe('dead letters', () => {
  it('lists the store and redelivers a payload with the same body as a new series, recorded', async () => {
    const list = await runCli(['dead-letters', '--webhook', 'crm', '--database-url', db.url]);
    expect(list.stdout).toMatch(new RegExp(`payload ${ids.deadPayload}\\s+webhook crm\\s+rejected`));
    const {
      rows: [before],
    } = await db.pool.query<{ body: string }>('select body from asset_webhooks.payloads where payload_id = $1', [
      ids.deadPayload,
    ]);
    const redelivered = await runCli([
      'dead-letters',
      'redeliver',
      String(ids.deadPayload),
      '--json',
      '--database-url',
      db.url,
    ]);
    expect(redelivered.code).toBe(0);
    expect(JSON.parse(redelivered.stdout)).toEqual({
      payloadId: ids.deadPayload,
      webhookId: 'crm',
      series: 2,
      webhookState: 'enabled',
      movedFrom: null,
    });
    expect(redelivered.stderr).toBe('');
    const {
      rows: [after],
    } = await db.pool.query<{ body: string; status: string; series: number; attempts: number }>(
      'select body, status, series, attempts from asset_webhooks.payloads where payload_id = $1',
      [ids.deadPayload],
    );
    expect(after).toEqual({ body: before!.body, status: 'pending', series: 2, attempts: 0 });
    const { rows: records } = await db.pool.query(
      'select series, previous_reason from asset_webhooks.redeliveries where payload_id = $1',
      [ids.deadPayload],
    );
    expect(records).toEqual([{ series: 2, previous_reason: 'rejected' }]);
    const again = await runCli(['dead-letters', 'redeliver', String(ids.deadPayload), '--database-url', db.url]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/expected a dead-lettered payload, got one that is pending/);
  });

  it('redelivers to a disabled webhook, saying that the payload waits and may expire', async () => {
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected', dead_lettered_at = now() where payload_id = $1",
      [ids.deadPayload],
    );
    await db.pool.query("update asset_webhooks.webhooks set enabled = false where webhook_id = 'crm'");
    try {
      const result = await runCli(['dead-letters', 'redeliver', String(ids.deadPayload), '--database-url', db.url]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(
        new RegExp(
          `payload ${ids.deadPayload} of webhook crm queued for redelivery \\(series 3\\); it is not sent while the webhook is not enabled`,
        ),
      );
      expect(result.stderr).toMatch(
        /^warning: webhook crm is disabled: the payload waits until the webhook is enabled .* and is dead-lettered as expired if that takes longer than retry\.deadLetterAfterSeconds; to send it to another webhook: asset-webhooks dead-letters redeliver \d+ --to WEBHOOK_ID\n$/,
      );
    } finally {
      await db.pool.query("update asset_webhooks.webhooks set enabled = true where webhook_id = 'crm'");
    }
  });

  it('redelivers to a webhook a 410 suspended, saying that the payload waits without expiring until resume --webhook', async () => {
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected', dead_lettered_at = now() where payload_id = $1",
      [ids.deadPayload],
    );
    await db.pool.query(
      "update asset_webhooks.webhooks set paused_since = now(), gone_since = now() where webhook_id = 'crm'",
    );
    try {
      const result = await runCli(['dead-letters', 'redeliver', String(ids.deadPayload), '--database-url', db.url]);
      expect(result.code).toBe(0);
      expect(result.stderr).toMatch(
        /^warning: webhook crm was suspended by a 410 Gone answer \(retry\.disableOnGone\): the payload waits, without expiring, until `asset-webhooks resume --webhook crm` or a new url; to send it to another webhook: asset-webhooks dead-letters redeliver \d+ --to WEBHOOK_ID\n$/,
      );
    } finally {
      await db.pool.query(
        "update asset_webhooks.webhooks set paused_since = null, gone_since = null where webhook_id = 'crm'",
      );
    }
  });

  it('trace shows each series of attempts after the redelivery that started it', async () => {
    // Its own two redeliveries, from the state the seed left (series 1 dead-lettered as rejected),
    // whatever the tests before it did.
    const deadLetter =
      "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected', dead_lettered_at = now() where payload_id = $1";
    await db.pool.query('delete from asset_webhooks.redeliveries where payload_id = $1', [ids.deadPayload]);
    await db.pool.query('delete from asset_webhooks.attempt_log where payload_id = $1 and series > 1', [
      ids.deadPayload,
    ]);
    await db.pool.query('update asset_webhooks.payloads set series = 1, attempts = 1 where payload_id = $1', [
      ids.deadPayload,
    ]);
    for (const series of [2, 3]) {
      await db.pool.query(deadLetter, [ids.deadPayload]);
      expect(
        (await runCli(['dead-letters', 'redeliver', String(ids.deadPayload), '--database-url', db.url])).stdout,
      ).toContain(`(series ${series})`);
    }
    const result = await runCli(['trace', ids.dead, '--database-url', db.url]);
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n').filter((line) => /^ {4}(attempt|redelivered)/.test(line));
    expect(lines[0]).toMatch(/^ {4}attempt 1 of series 1 at .*: HTTP 422 in 5 ms -> rejected$/);
    expect(lines[1]).toMatch(/^ {4}redelivered as series 2, requested by \S+ at .* \(series 1 had ended rejected\)$/);
    expect(lines[2]).toMatch(/^ {4}redelivered as series 3, requested by \S+ at .* \(series 2 had ended rejected\)$/);
    expect(lines).toHaveLength(3);
  });

  it('trace says when an attempt without a result is closed and sent again if its process has stopped', async () => {
    await db.pool.query(
      `insert into asset_webhooks.attempt_log (payload_id, series, attempt_no, started_at)
      values ($1, 3, 1, '2026-11-23T10:00:00Z')`,
      [ids.deadPayload],
    );
    try {
      const result = await runCli(['trace', ids.dead, '--database-url', db.url]);
      expect(result.stdout).toMatch(
        /\n {4}attempt 1 of series 3 at 2026-11-23T10:00:00\.000Z: no result recorded yet -> in progress \(if its process stopped, the attempt is closed and the payload sent again from about 2026-11-23T10:10:00\.000Z\)\n/,
      );
    } finally {
      await db.pool.query('delete from asset_webhooks.attempt_log where payload_id = $1 and series = 3', [
        ids.deadPayload,
      ]);
    }
  });
});

describe('psql runbooks', () => {
  const variables: Record<string, string[]> = {
    'find-event.sql': ['event_id=EVENT'],
    'events-in-window.sql': ['from=2000-01-01T00:00Z', 'to=2100-01-01T00:00Z', 'asset_id=1'],
    'why-excluded.sql': ['event_id=EXCLUDED', 'webhook_id=shop'],
    'dead-letters.sql': [],
    'redeliver-dead-letter.sql': ['payload_id=DEAD'],
    'backlog-and-lag.sql': [],
    'pause-webhook.sql': ['webhook_id=crm'],
    'after-key-rotation.sql': ['webhook_id=crm'],
    'backfills.sql': [],
    'replays.sql': [],
  };

  it('has a test entry for every runbook', () => {
    expect(
      readdirSync(runbooks)
        .filter((f) => f.endsWith('.sql'))
        .sort(),
    ).toEqual(Object.keys(variables).sort());
  });

  it.each(Object.keys(variables))('%s runs with psql against a seeded database', async (file) => {
    if (file === 'redeliver-dead-letter.sql') {
      await db.pool.query(
        "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'retries_exhausted', dead_lettered_at = now() where payload_id = $1",
        [ids.deadPayload],
      );
    }
    const args = variables[file]!.flatMap((v) => [
      '-v',
      v
        .replace('=EVENT', `=${ids.delivered}`)
        .replace('=EXCLUDED', `=${ids.excluded}`)
        .replace('=DEAD', `=${ids.deadPayload}`),
    ]);
    const { stdout } = await promisify(execFile)('psql', [
      db.url,
      '-X',
      '-v',
      'ON_ERROR_STOP=1',
      ...args,
      '-f',
      `${runbooks}${file}`,
    ]);
    const expected: Record<string, RegExp> = {
      'find-event.sql': /crm\s+\|\s+delivered/,
      'events-in-window.sql': /CREATED\s+\|\s+1\s+\|\s+crm/,
      'why-excluded.sql': /filter group 1 of the webhook did not pass/,
      'dead-letters.sql': /\(\d+ rows?\)/,
      'redeliver-dead-letter.sql': /retries_exhausted/,
      'backlog-and-lag.sql': /outbox_rows/,
      'pause-webhook.sql': /crm\s+\|\s+t/,
      'after-key-rotation.sql': /payload_id/,
      'backfills.sql': /backfill_id \| webhook_id \| status[^]*Delivery of the backfilled events/,
      'replays.sql': /replay_id \| webhook_id \| to_webhook_id[^]*Delivery of the replayed series/,
    };
    expect(stdout).toMatch(expected[file]!);
  });

  const psql = (file: string, variables: string[], env: NodeJS.ProcessEnv = {}) =>
    promisify(execFile)('psql', [db.url, '-X', ...variables.flatMap((v) => ['-v', v]), '-f', `${runbooks}${file}`], {
      env: { ...process.env, ...env },
    });

  it.each(Object.entries(variables).filter(([, vars]) => vars.length > 0))(
    '%s without its variables names the one missing and fails',
    async (file, vars) => {
      const failure = await psql(file, []).then(
        () => null,
        (error: { code: number; stderr: string }) => error,
      );
      expect(failure?.code).toBe(3);
      const first = vars[0]!.split('=')[0]!;
      expect(failure?.stderr).toMatch(new RegExp(`ERROR:  missing variable ${first}: run with -v ${first}=`));
    },
  );

  it('find-event.sql says so when no event has the id', async () => {
    const { stdout } = await psql('find-event.sql', ['event_id=0195a3b0-0000-7000-8000-000000000000']);
    expect(stdout).toContain(
      'No such event: it was not captured by this installation, or it is older than retentionDays.',
    );
    const found = await psql('find-event.sql', [`event_id=${ids.delivered}`]);
    expect(found.stdout).not.toContain('No such event');
  });

  it('redeliver-dead-letter.sql on a payload that is not dead-lettered changes nothing and says so', async () => {
    const {
      rows: [delivered],
    } = await db.pool.query<{ payload_id: number }>(
      "select payload_id from asset_webhooks.payloads where status = 'delivered' limit 1",
    );
    const { stdout } = await psql('redeliver-dead-letter.sql', [`payload_id=${delivered!.payload_id}`]);
    expect(stdout).toContain('Nothing was redelivered: the payload is not dead-lettered');
    expect(stdout).toMatch(new RegExp(`${delivered!.payload_id}\\s+\\|\\s+crm\\s+\\|\\s+delivered`));
    const { rows } = await db.pool.query('select 1 from asset_webhooks.redeliveries where payload_id = $1', [
      delivered!.payload_id,
    ]);
    expect(rows).toEqual([]);
  });

  it('events-in-window.sql reads a time without an offset as UTC, whatever the session time zone', async () => {
    const {
      rows: [event],
    } = await db.pool.query<{ at: string }>(
      `select to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as at from asset_webhooks.events where event_id = $1`,
      [ids.delivered],
    );
    const to = new Date(`${event!.at}Z`);
    to.setUTCSeconds(to.getUTCSeconds() + 1);
    const { stdout } = await psql(
      'events-in-window.sql',
      [`from=${event!.at}`, `to=${to.toISOString().slice(0, 19)}`],
      { PGTZ: 'America/New_York' },
    );
    expect(stdout).toContain(ids.delivered);
  });
});
