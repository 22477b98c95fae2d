import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { bodyEvents, openWebhook, payloads, registerWebhooks, resetData, runCoalesce } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();

it(
  'trace, events, explain and reconcile on the command line show an UNMATCHED, its cause and membership',
  { timeout: 60_000 },
  async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.mirror_members, asset_webhooks.reconciles');
    const filters = [{ filterKind: 'keywords' as const, condition: 'ANY' as const, value: ['shop'] }];
    const copy = openWebhook('copy', { mirror: true, resourceTypes: ['Resource'], filters });
    await registerWebhooks(db.pool, [copy]);
    await db.pool.query('insert into assets (asset_id) values (7)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (7, 'shop')");
    await runCoalesce(db.pool, [copy]);
    await db.pool.query('delete from asset_keywords where asset_id = 7');
    await runCoalesce(db.pool, [copy]);
    const unmatched = (await payloads(db.pool, 'copy')).flatMap(bodyEvents).at(-1)!;
    expect(unmatched.eventType).toBe('UNMATCHED');

    const trace = await runCli(['trace', unmatched.eventId, '--database-url', db.url]);
    expect(trace.stdout).toMatch(/event .*: EDITED of asset 7/);
    expect(trace.stdout).toMatch(
      /copy: sent as UNMATCHED: the asset left the mirror webhook's set, excluded by filter:1.*; in payload/,
    );
    const json = JSON.parse(
      (await runCli(['trace', unmatched.eventId, '--json', '--database-url', db.url])).stdout,
    ) as {
      routes: Array<{ sentAs: string; excludedBy: string }>;
    };
    expect(json.routes).toMatchObject([{ sentAs: 'UNMATCHED', excludedBy: 'filter:1' }]);

    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const events = await runCli(['events', '--from', from, '--to', to, '--webhook', 'copy', '--database-url', db.url]);
    expect(events.stdout).toMatch(/copy: pending as UNMATCHED \(filter:1\) payload \d+/);

    const file = path.join(tempDirectory('aw-mirror-cli-'), 'config.yaml');
    writeFileSync(
      file,
      `assetUpdater:\n  webhooks:\n    - { id: copy, url: "https://receiver.example/copy", enabled: true, mirror: true, filters: [{ filterKind: keywords, condition: ANY, value: [web] }] }\n`,
    );
    const explain = await runCli([
      'explain',
      '--webhook',
      'copy',
      '--asset',
      '7',
      '--config',
      file,
      '--database-url',
      db.url,
    ]);
    expect(explain.stdout).toMatch(/mirror: not in the webhook's set \(left it; last event \S+\)/);

    // The asset gets the keyword of the new filters: reconcile sends it, and explain then says it is in the set.
    await db.pool.query("insert into asset_keywords (asset_id, value) values (7, 'web')");
    await db.pool.query('delete from asset_webhooks.outbox');
    const dry = await runCli([
      'reconcile',
      '--webhook',
      'copy',
      '--dry-run',
      '--config',
      file,
      '--database-url',
      db.url,
    ]);
    expect(dry).toMatchObject({ code: 0 });
    expect(dry.stdout).toMatch(
      /dry run of reconcile of webhook copy: 1 assets read, 1 EDITED and 0 UNMATCHED would be sent/,
    );
    const done = await runCli(['reconcile', '--webhook', 'copy', '--json', '--config', file, '--database-url', db.url]);
    expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed', editedSent: 1, unmatchedSent: 0 });
    const after = await runCli([
      'explain',
      '--webhook',
      'copy',
      '--asset',
      '7',
      '--config',
      file,
      '--database-url',
      db.url,
    ]);
    expect(after.stdout).toMatch(/mirror: in the webhook's set \(last event \S+\)$/m);
    const reconciled = (await payloads(db.pool, 'copy')).flatMap(bodyEvents).at(-1)!;
    expect((await runCli(['trace', reconciled.eventId, '--database-url', db.url])).stdout).toMatch(
      /RECONCILED: written by reconcile 1/,
    );

    // A plain webhook is refused, naming what to use.
    const plainFile = path.join(tempDirectory('aw-mirror-cli-'), 'plain.yaml');
    writeFileSync(
      plainFile,
      `assetUpdater:\n  webhooks:\n    - { id: plain, url: "https://receiver.example/p", enabled: true }\n`,
    );
    const refused = await runCli(['reconcile', '--webhook', 'plain', '--config', plainFile, '--database-url', db.url]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('--webhook: expected a webhook with mirror: true, got plain');
  },
);
