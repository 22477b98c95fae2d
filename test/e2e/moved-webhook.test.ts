import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { beforeEach, describe, expect, it } from 'vitest';
import { defaultWebhookId } from '../../src/config/schema.js';
import { runCli, startCli, type CliProcess } from '../helpers/cli.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

// A webhook without `id` is known by an id derived from its url: a url change
// makes it another webhook. What waited for the old one must not be stranded.

const tempDirectory = useTempDirectories();
const db = useTestDatabase();
const cleanup = useCleanup();

beforeEach(() => resetData(db.pool));

async function receiver(status: number): Promise<TestReceiver> {
  const started = await startTestReceiver();
  started.respond = () => status;
  cleanup.close(started);
  return started;
}

/** A document of webhooks without ids (each as the spec writes them), or with the given fields. */
function writeConfig(webhooks: ReadonlyArray<Record<string, unknown>>): string {
  const file = path.join(tempDirectory('aw-moved-'), 'config.yaml');
  writeFileSync(
    file,
    stringify({
      assetUpdater: {
        intervalSeconds: 1,
        network: { allowPrivateAddresses: true },
        // A failed attempt is tried again only after a minute: the payload stays pending meanwhile.
        retry: { delaysSeconds: [60] },
        webhooks: webhooks.map((webhook) => ({ enabled: true, ...webhook })),
      },
    }),
  );
  return file;
}

function run(configFile: string): CliProcess {
  const started = startCli(['run', '--database-url', db.url, '--config', configFile], { env: { LOG_LEVEL: 'info' } });
  cleanup.process(started);
  return started;
}

async function running(process: CliProcess): Promise<void> {
  await eventually(async () => (process.output.stderr.includes('asset-webhooks running') ? true : undefined), {
    timeoutMs: 30_000,
    what: 'the run process to start',
  });
}

async function stop(process: CliProcess): Promise<void> {
  process.child.kill('SIGTERM');
  expect(await process.exited).toBe(0);
}

async function payloadsOf(
  webhookId: string,
): Promise<Array<{ payload_id: number; status: string; dead_letter_reason: string | null }>> {
  const { rows } = await db.pool.query<{ payload_id: number; status: string; dead_letter_reason: string | null }>(
    'select payload_id, status, dead_letter_reason from asset_webhooks.payloads where webhook_id = $1 order by payload_id',
    [webhookId],
  );
  return rows;
}

async function finishedRuns(): Promise<number> {
  const {
    rows: [row],
  } = await db.pool.query<{ runs: number }>(
    'select count(*)::int as runs from asset_webhooks.coalesce_runs where finished_at is not null',
  );
  return row!.runs;
}

/** Inserts an asset and waits until `target` has received a request for it, so the payload is pending (503) or delivered. */
async function createAsset(assetId: number, target: TestReceiver): Promise<void> {
  const before = target.requests.length;
  await db.pool.query('insert into assets (asset_id) values ($1)', [assetId]);
  await target.waitFor(before + 1, 30_000);
}

/**
 * A receiver that fails (503) and one that takes what it is sent, each known
 * by its url's derived id, and a run process started (and running) with a
 * webhook without id for the failing url.
 */
async function runningOnFailingUrl(): Promise<{
  failing: TestReceiver;
  fixed: TestReceiver;
  oldId: string;
  newId: string;
  first: CliProcess;
}> {
  const failing = await receiver(503);
  const fixed = await receiver(200);
  const first = run(writeConfig([{ url: failing.url }]));
  await running(first);
  return { failing, fixed, oldId: defaultWebhookId(failing.url), newId: defaultWebhookId(fixed.url), first };
}

describe('check-config and run say what a derived id means', () => {
  it('check-config warns for a webhook without id, naming the derived id, and still exits 0', async () => {
    const url = 'https://receiver.example/assets';
    const file = writeConfig([{ url }, { id: 'crm', url: 'https://crm.example/hook' }]);
    const result = await runCli(['check-config', file]);
    expect(result.code).toBe(0);
    const id = defaultWebhookId(url);
    expect(result.stderr).toBe(
      `assetUpdater.webhooks[0].id: warning: not set, so the id ${id} is derived from the url; ` +
        'if the url changes, the webhook gets another id and the payloads still waiting for this one are dead-lettered as webhook_removed ' +
        `(send them on with \`asset-webhooks dead-letters redeliver PAYLOAD_ID --to NEW_ID\`); set id: ${id} to keep the id through a url change\n`,
    );
  });
});

describe('a webhook whose url changed', () => {
  it("dead-letters the old id's waiting payloads as webhook_removed at start, and --to sends one to the new id", async () => {
    const { failing, fixed, oldId, newId, first } = await runningOnFailingUrl();
    expect(first.output.stderr).toContain(
      `"warning":"assetUpdater.webhooks[0].id: warning: not set, so the id ${oldId} is derived from the url`,
    );
    await createAsset(1, failing);
    expect(await payloadsOf(oldId)).toMatchObject([{ status: 'pending' }]);
    await stop(first);

    const second = run(writeConfig([{ url: fixed.url }]));
    await running(second);
    // Recorded at start: no waiting for expiry (a day) or a retry.
    const [removed] = await payloadsOf(oldId);
    expect(removed).toMatchObject({ status: 'dead_lettered', dead_letter_reason: 'webhook_removed' });
    expect(second.output.stderr).toContain('"reason":"webhook_removed"');
    const letters = await runCli(['dead-letters', '--json', '--database-url', db.url]);
    expect(JSON.parse(letters.stdout)).toMatchObject([
      { payloadId: removed!.payload_id, webhookId: oldId, reason: 'webhook_removed' },
    ]);
    expect((await runCli(['dead-letters', '--database-url', db.url])).stdout).toContain(
      `redeliver: asset-webhooks dead-letters redeliver ${removed!.payload_id} --to WEBHOOK_ID`,
    );

    const moved = await runCli([
      'dead-letters',
      'redeliver',
      String(removed!.payload_id),
      '--to',
      newId,
      '--database-url',
      db.url,
    ]);
    expect(moved.stderr).toBe('');
    expect(moved.code).toBe(0);
    expect(moved.stdout).toBe(
      `payload ${removed!.payload_id} of webhook ${newId} (moved from webhook ${oldId}) queued for redelivery (series 2); a running service sends it\n`,
    );
    await fixed.waitFor(1);
    // The same bytes: body and eventIds as the old url got them.
    expect(fixed.requests[0]!.body).toBe(failing.requests[0]!.body);
    await eventually(async () => ((await payloadsOf(newId))[0]?.status === 'delivered' ? true : undefined), {
      timeoutMs: 20_000,
      what: 'the moved payload delivered',
    });
    expect(await payloadsOf(newId)).toMatchObject([{ payload_id: removed!.payload_id, status: 'delivered' }]);
    const { rows: records } = await db.pool.query(
      'select series, previous_reason, moved_from from asset_webhooks.redeliveries',
    );
    expect(records).toEqual([{ series: 2, previous_reason: 'webhook_removed', moved_from: oldId }]);

    const eventId = (JSON.parse(fixed.requests[0]!.body) as { events: Array<{ eventId: string }> }).events[0]!.eventId;
    const trace = await runCli(['trace', eventId, '--database-url', db.url]);
    expect(trace.stdout).toContain(`  ${oldId}: in payload ${removed!.payload_id} (1 events, created `);
    expect(trace.stdout).toContain(`, moved to webhook ${newId}): delivered at `);
    expect(trace.stdout).toMatch(
      new RegExp(
        `redelivered as series 2 to webhook ${newId} \\(moved from webhook ${oldId}\\), requested by .* \\(series 1 had ended webhook_removed\\)`,
      ),
    );

    // Later events go to the new id only.
    await createAsset(2, fixed);
    expect(failing.requests).toHaveLength(1);
  }, 120_000);

  it('bulk redelivery of webhook_removed dead letters: back to the old id says they are dead-lettered again (they are); --to-webhook moves them all, sent in order', async () => {
    const { failing, fixed, oldId, newId, first } = await runningOnFailingUrl();
    // Three payloads for the old url: the first is tried (503) and holds the other two behind it.
    await createAsset(1, failing);
    for (const [assetId, payloads] of [
      [2, 2],
      [3, 3],
    ] as const) {
      await db.pool.query('insert into assets (asset_id) values ($1)', [assetId]);
      await eventually(async () => ((await payloadsOf(oldId)).length === payloads ? true : undefined), {
        timeoutMs: 30_000,
        what: `payload ${payloads} of the old id`,
      });
    }
    await stop(first);
    const second = run(writeConfig([{ url: fixed.url }]));
    await running(second);
    const removed = await payloadsOf(oldId);
    expect(removed.map((payload) => payload.dead_letter_reason)).toEqual(Array(3).fill('webhook_removed'));
    const [firstId, lastId] = [removed[0]!.payload_id, removed[2]!.payload_id];
    const redeliver = (...args: string[]) =>
      runCli([
        'dead-letters',
        'redeliver',
        '--webhook',
        oldId,
        '--reason',
        'webhook_removed',
        ...args,
        '--database-url',
        db.url,
      ]);

    // Back to the removed webhook: the warning says what happens, and it happens.
    const back = await redeliver();
    expect(back.code).toBe(0);
    expect(back.stderr).toBe(
      `warning: webhook ${oldId} is in the configuration of no running process (removed): the payloads are dead-lettered again as ` +
        'webhook_removed when a run process next records its configuration (before its next coalescing run); to send them to another ' +
        `webhook: asset-webhooks dead-letters redeliver --webhook ${oldId} --reason webhook_removed --to-webhook WEBHOOK_ID\n`,
    );
    expect(back.stdout).toBe(
      `3 dead letters of webhook ${oldId} queued for redelivery (payloads ${firstId} to ${lastId}), sent in payload order; they are not sent: the webhook is removed\n`,
    );
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          "select count(*)::int as n from asset_webhooks.payloads where webhook_id = $1 and status = 'dead_lettered' and dead_letter_reason = 'webhook_removed' and series = 2",
          [oldId],
        );
        return rows[0]!.n === 3 ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the payloads dead-lettered again as webhook_removed' },
    );
    expect(failing.requests).toHaveLength(1);

    // A dry run checks the target and changes nothing; a webhook the service does not send to is refused.
    const dry = await redeliver('--to-webhook', newId, '--dry-run');
    expect(dry.stdout).toBe(
      `3 dead letters of webhook ${oldId} would be moved to webhook ${newId} and queued for redelivery (payloads ${firstId} to ${lastId}); dry run, nothing changed\n`,
    );
    const nowhere = await redeliver('--to-webhook', 'nowhere');
    expect({ code: nowhere.code, stderr: nowhere.stderr }).toEqual({
      code: 1,
      stderr: `--to-webhook: expected an enabled webhook of the running service (${newId}), got "nowhere" (never run with)\n`,
    });
    expect(fixed.requests).toHaveLength(0);

    // To the new webhook, in one command: all of them, in payload order, the same bodies.
    const moved = await redeliver('--to-webhook', newId);
    expect(moved.stderr).toBe('');
    expect(moved.code).toBe(0);
    expect(moved.stdout).toBe(
      `3 dead letters of webhook ${oldId} moved to webhook ${newId} and queued for redelivery (payloads ${firstId} to ${lastId}), sent in payload order; a running service sends them\n`,
    );
    await fixed.waitFor(3, 30_000);
    expect(fixed.requests[0]!.body).toBe(failing.requests[0]!.body);
    expect(
      fixed.requests.map(
        (request) => (JSON.parse(request.body) as { events: Array<{ assetId: number }> }).events[0]!.assetId,
      ),
    ).toEqual([1, 2, 3]);
    await eventually(
      async () =>
        (await payloadsOf(newId)).filter((payload) => payload.status === 'delivered').length === 3 ? true : undefined,
      { timeoutMs: 20_000, what: 'the moved payloads delivered' },
    );
    expect((await payloadsOf(newId)).map((payload) => payload.payload_id)).toEqual(removed.map((p) => p.payload_id));
    const { rows: records } = await db.pool.query(
      'select series, previous_reason, moved_from from asset_webhooks.redeliveries where series = 3 order by payload_id',
    );
    expect(records).toEqual(Array(3).fill({ series: 3, previous_reason: 'webhook_removed', moved_from: oldId }));
  }, 120_000);

  it("leaves the old id's payloads waiting while another running process still has it, and dead-letters them once it stops", async () => {
    const failing = await receiver(503);
    const fixed = await receiver(200);
    const oldId = defaultWebhookId(failing.url);
    const oldProcess = run(writeConfig([{ url: failing.url }]));
    await running(oldProcess);
    await createAsset(1, failing);

    // A rolling change: the new document runs beside the old one. Each
    // coalescing run, made by either process, records that process's
    // configuration first, and routes by it.
    const newProcess = run(writeConfig([{ url: fixed.url }]));
    await running(newProcess);
    const runsBefore = await finishedRuns();
    await db.pool.query('insert into assets (asset_id) values (2), (3)');
    await eventually(async () => ((await finishedRuns()) >= runsBefore + 3 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'three coalescing runs while both run',
    });
    const waiting = await payloadsOf(oldId);
    expect(waiting.length).toBeGreaterThanOrEqual(1);
    expect(waiting.filter((payload) => payload.status === 'dead_lettered')).toEqual([]);

    await stop(oldProcess);
    // The new process's next recording (before its next coalescing run) finds the old id configured nowhere.
    await eventually(
      async () => ((await payloadsOf(oldId)).every((payload) => payload.status === 'dead_lettered') ? true : undefined),
      { timeoutMs: 20_000, what: 'the old payloads dead-lettered' },
    );
    expect(new Set((await payloadsOf(oldId)).map((payload) => payload.dead_letter_reason))).toEqual(
      new Set(['webhook_removed']),
    );
  }, 120_000);

  it('does not take a disabled webhook for removed: its payloads wait', async () => {
    const failing = await receiver(503);
    const first = run(writeConfig([{ id: 'crm', url: failing.url }]));
    await running(first);
    await createAsset(1, failing);
    await stop(first);
    const second = run(writeConfig([{ id: 'crm', url: failing.url, enabled: false }]));
    await running(second);
    expect(await payloadsOf('crm')).toMatchObject([{ status: 'pending', dead_letter_reason: null }]);
  }, 90_000);

  it('refuses --to a webhook that is not enabled in the running service, naming the enabled ones', async () => {
    const failing = await receiver(503);
    const first = run(
      writeConfig([
        { id: 'crm', url: failing.url },
        { id: 'off', url: failing.url.replace('/hook', '/off'), enabled: false },
      ]),
    );
    await running(first);
    await createAsset(1, failing);
    const [payload] = await payloadsOf('crm');
    await db.pool.query(
      "update asset_webhooks.payloads set status = 'dead_lettered', dead_letter_reason = 'rejected', dead_lettered_at = now() where payload_id = $1",
      [payload!.payload_id],
    );
    for (const [to, why] of [
      ['off', 'disabled'],
      ['nowhere', 'never run with'],
    ] as const) {
      const result = await runCli([
        'dead-letters',
        'redeliver',
        String(payload!.payload_id),
        '--to',
        to,
        '--database-url',
        db.url,
      ]);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(
        `--to: expected an enabled webhook of the running service (crm), got "${to}" (${why})\n`,
      );
    }
    expect(await payloadsOf('crm')).toMatchObject([{ status: 'dead_lettered' }]);
  }, 90_000);
});
