import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

// `explain` through the real command line against the reference asset schema:
// the asset is read from asset_webhooks.asset_state as the coalescer reads it.

const db = useTestDatabase();
const configFile = path.join(tempDirectory('aw-explain-command-'), 'config.yaml');

beforeAll(async () => {
  writeFileSync(
    configFile,
    `assetUpdater:
  webhooks:
    - id: shop
      url: https://shop.example/hook
      enabled: true
      filters:
        - { filterKind: keywords, condition: ANY, value: [summer] }
        - { filterKind: additionalFields, fieldName: campaign, condition: AND, value: ["2026"] }
        - { filterKind: schemaId, condition: NONE, value: ["99"] }
    - id: children
      url: https://children.example/hook
      enabled: true
      resourceTypes: [Resource, Project]
      filters:
        - { filterKind: parentId, condition: ANY, value: ["7001"] }
    - id: created-only
      url: https://created.example/hook
      enabled: true
      eventTypes: [Created]
    - id: paused
      url: https://paused.example/hook
      enabled: false
`,
  );
  // A top-level resource that every shop filter takes, a child of it, a
  // Project, and one with a keyword in the wrong case.
  await db.pool.query(`insert into assets (asset_id, supertype, parent_id, state, schema_id) values
    (7001, 'Resource', null, 'approved', 12),
    (7002, 'Project', 7001, null, null),
    (7003, 'Project', null, null, 99),
    (7004, 'Resource', null, null, 99)`);
  // 7008: the shop's asset, in the Trash.
  await db.pool.query(
    `insert into assets (asset_id, supertype, state, schema_id, trashed_at) values (7008, 'Resource', 'approved', 12, now())`,
  );
  await db.pool.query(
    `insert into asset_keywords values (7001, 'summer'), (7001, 'product'), (7002, 'summer'), (7004, 'Summer'), (7008, 'summer')`,
  );
  await db.pool.query(
    `insert into asset_additional_fields values (7001, 'campaign', '2026'), (7001, 'region', 'emea'), (7004, 'region', '2026'), (7008, 'campaign', '2026')`,
  );
});

const explain = (args: readonly string[], env: NodeJS.ProcessEnv = {}) =>
  runCli(['explain', ...args, '--config', configFile, '--database-url', db.url], { env });

describe('explain evaluates a webhook against an asset in the database', () => {
  it.concurrent.for([
    // [what, webhook, asset, --event-type (none: EDITED), excluded by (null: delivered)]
    ['a top-level resource with every value the filters want is delivered', 'shop', 7001, undefined, null],
    ['a keyword in another case does not match (exact, case-sensitive)', 'shop', 7004, undefined, 'filter:1'],
    ['a Project is excluded by the default resourceTypes', 'shop', 7002, undefined, 'resource_type'],
    ['a parentId filter lets a child through', 'children', 7002, undefined, null],
    ['a parentId filter excludes a top-level asset it does not name', 'children', 7003, 'Reversion', 'filter:1'],
    ['the default event type EDITED is not in eventTypes [Created]', 'created-only', 7001, undefined, 'event_type'],
    ['CREATED is in eventTypes [Created]', 'created-only', 7001, 'CREATED', null],
    ['PURGED (any case) passes every check', 'created-only', 7002, 'purged', null],
    ['a disabled webhook receives not even PURGED', 'paused', 7001, 'Purged', 'disabled'],
    ['an EDITED of an asset in the Trash is excluded for every webhook', 'shop', 7008, undefined, 'in_trash'],
    ['so is a REVERSION', 'children', 7008, 'Reversion', 'in_trash'],
    ['its DELETED passes the in_trash check', 'shop', 7008, 'Deleted', null],
  ] as const)('%s', async ([, webhook, asset, eventType, expected], { expect }) => {
    const result = await explain([
      '--webhook',
      webhook,
      '--asset',
      String(asset),
      ...(eventType ? ['--event-type', eventType] : []),
      '--json',
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const output: unknown = JSON.parse(result.stdout);
    expect(output).toMatchObject({
      webhookId: webhook,
      assetId: asset,
      eventType: (eventType ?? 'EDITED').toUpperCase(),
      delivered: expected === null,
      excludedBy: expected,
    });
  });

  it('gives the asset as the filters saw it, ids as numbers and lists in order', async () => {
    const result = await explain(['--webhook', 'shop', '--asset', '7001', '--json']);
    expect(JSON.parse(result.stdout)).toMatchObject({
      asset: {
        assetId: 7001,
        supertype: 'Resource',
        parentId: null,
        state: 'approved',
        schemaId: 12,
        typeId: null,
        domainId: null,
        keywords: ['product', 'summer'],
        fieldNames: ['campaign', 'region'],
        fieldValues: ['2026', 'emea'],
      },
      checks: [
        { check: 'disabled', verdict: 'pass' },
        { check: 'resource_type', verdict: 'pass' },
        { check: 'event_type', verdict: 'pass' },
        { check: 'parent', verdict: 'pass' },
        { check: 'filter:1', verdict: 'pass' },
        { check: 'filter:2', verdict: 'pass' },
        { check: 'filter:3', verdict: 'pass' },
      ],
    });
  });

  it('prints each check in words and the verdict for an operator', async () => {
    const result = await explain(['--webhook', 'shop', '--asset', '7004']);
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^webhook shop, asset 7004 \(Resource, [0-9a-f-]{36}\), event EDITED:$/);
    expect(lines.slice(1).map((line) => line.trim().split(/\s+/).slice(0, 2).join(' '))).toEqual([
      'pass disabled',
      'pass resource_type',
      'pass event_type',
      'pass parent',
      'fail filter:1',
      'skipped filter:2',
      'skipped filter:3',
      '=> excluded',
    ]);
    expect(result.stdout).toContain(
      'keywords ANY [summer]: the asset has [Summer], matching none: ANY needs at least one listed value, none is present',
    );
    expect(lines.at(-1)).toBe('=> excluded by filter:1');
  });

  it('escapes a keyword that would colour the terminal and forge a line of its own', async () => {
    const keyword = 'k\u001b[31mRED\u001b[0m\n  pass    filter:9       FORGED\u202e';
    await db.pool.query(`insert into assets (asset_id, supertype) values (7005, 'Resource'), (7006, 'Resource\u0007')`);
    await db.pool.query('insert into asset_keywords values (7005, $1)', [keyword]);
    const result = await explain(['--webhook', 'shop', '--asset', '7005']);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    const lines = result.stdout.trim().split('\n');
    expect(lines.filter((line) => line.includes('FORGED'))).toEqual([
      '  fail    filter:1       keywords ANY [summer]: the asset has [k\\e[31mRED\\e[0m\\n  pass    filter:9       FORGED\\u202e], matching none: ANY needs at least one listed value, none is present',
    ]);
    const bell = await explain(['--webhook', 'shop', '--asset', '7006']);
    expect(bell.stdout.split('\n')[0]).toMatch(
      /^webhook shop, asset 7006 \(Resource\\u0007, [0-9a-f-]{36}\), event EDITED:$/,
    );
    // --json escapes as JSON does, and keeps the value itself.
    const json = await explain(['--webhook', 'shop', '--asset', '7005', '--json']);
    expect((JSON.parse(json.stdout) as { asset: { keywords: string[] } }).asset.keywords).toEqual([keyword]);
  });

  it('reads the configuration from ASSET_WEBHOOKS_CONFIG when --config is not given', async () => {
    const result = await runCli(['explain', '--webhook', 'shop', '--asset', '7001', '--database-url', db.url], {
      env: {
        ASSET_WEBHOOKS_CONFIG: configFile,
      },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('=> delivered');
  });
});

describe('explain refuses what it cannot evaluate', () => {
  it('an unknown webhook id: exit 1, naming the configured ids', async () => {
    const result = await explain(['--webhook', 'crm', '--asset', '7001']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe('--webhook: expected one of shop, children, created-only, paused, got "crm"');
  });

  it('an asset id that does not exist: exit 1', async () => {
    const result = await explain(['--webhook', 'shop', '--asset', '999999']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      '--asset: expected an existing asset id, got 999999 (no such asset in asset_webhooks.asset_state)',
    );
  });

  it('no configuration at all: exit 1, naming --config and ASSET_WEBHOOKS_CONFIG', async () => {
    const result = await runCli(['explain', '--webhook', 'shop', '--asset', '7001', '--database-url', db.url], {
      env: {
        ASSET_WEBHOOKS_CONFIG: undefined,
      },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      '--config: expected a configuration file (or the environment variable ASSET_WEBHOOKS_CONFIG), got nothing',
    );
  });

  it('an unknown event type or a non-numeric asset id is bad usage: exit 2', async () => {
    expect((await explain(['--webhook', 'shop', '--asset', '7001', '--event-type', 'Renamed'])).code).toBe(2);
    expect((await explain(['--webhook', 'shop', '--asset', 'abc'])).code).toBe(2);
  });
});
