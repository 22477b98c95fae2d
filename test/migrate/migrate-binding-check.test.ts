import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { captureGaps } from '../../src/migrate/binding-check.js';
import { codeSchemaVersion } from '../../src/migrate/sql-files.js';
import { runCli } from '../helpers/cli.js';
import { startTestService } from '../helpers/service.js';
import { useTestDatabase } from '../helpers/test-database.js';

const codeVersion = codeSchemaVersion();

// A binding whose asset_state view the service cannot read is refused where it
// is installed (migrate) and where it is used (run), naming each column.
const badView = `
create table if not exists public.things (id bigint primary key, kind text, tags text);
create or replace view asset_webhooks.asset_state as
select t.id as asset_id, gen_random_uuid() as asset_uuid, t.kind as supertype, null::bigint as parent_id,
       null::text as state, null::bigint as schema_id, null::bigint as type_id, null::bigint as domain_id,
       null::bigint as latest_atom_id, t.tags as keywords, '{}'::text[] as field_names
from public.things t;
`;

const db = useTestDatabase({ empty: true });
let directory: string;

beforeAll(() => {
  directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bindcheck-'));
});
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** `explain` of asset 1 to webhook crm, on the configuration file `config`. */
const explainAsset1 = (config: string) =>
  runCli(['explain', '--webhook', 'crm', '--asset', '1', '--config', config, '--database-url', db.url]);

/**
 * The warnings the service logs as it starts on the configuration document
 * `config` and stops: `msg` and `field` of each log line that has `field`.
 */
async function startWarnings({
  config,
  field,
}: {
  config: string;
  field: string;
}): Promise<Array<{ msg: unknown } & Record<string, unknown>>> {
  let log = '';
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  const service = await startTestService(db.url, config, {
    logger: createLogger({ level: 'warn', destination: sink }),
  });
  await service.stop();
  return log
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line[field] !== undefined)
    .map((line) => ({ msg: line.msg, [field]: line[field] }));
}

const expectedProblems = [
  'view asset_webhooks.asset_state, column keywords: expected text[], got text',
  'view asset_webhooks.asset_state, column field_values: expected text[], got no such column',
];

/** What a binding view without in_trash (written before the column existed) is told. */
const noInTrash =
  'view asset_webhooks.asset_state, column in_trash: expected boolean, got no such column (true while the asset is in the Trash, ' +
  'which backfill needs: add it to the view, see docs/writing-a-binding.md, and run `asset-webhooks migrate --binding FILE` again)';

// The reference binding's view as it was before in_trash.
const viewWithoutInTrash = `
create or replace view asset_webhooks.asset_state as
select a.asset_id, a.asset_uuid, a.supertype, a.parent_id, a.state, a.schema_id, a.type_id, a.domain_id, a.latest_atom_id,
       coalesce(k.keywords, '{}'::text[]) as keywords,
       coalesce(f.field_names, '{}'::text[]) as field_names,
       coalesce(f.field_values, '{}'::text[]) as field_values
from public.assets a
left join lateral (select array_agg(k.value) as keywords from public.asset_keywords k where k.asset_id = a.asset_id) k on true
left join lateral (select array_agg(f.name) as field_names, array_agg(f.value) as field_values
                   from public.asset_additional_fields f where f.asset_id = a.asset_id) f on true;
`;

describe('a database never migrated', () => {
  it('every command but migrate says to run migrate, in one line (exit 1)', async () => {
    const config = path.join(directory, 'unmigrated.yaml');
    writeFileSync(
      config,
      'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n',
    );
    const commands = [
      ['trace', '00000000-0000-4000-8000-000000000000'],
      ['events', '--from', '2026-11-01', '--to', '2026-11-02'],
      ['dead-letters'],
      ['dead-letters', 'redeliver', '1'],
      ['explain', '--webhook', 'crm', '--asset', '1', '--config', config],
      ['run', '--config', config],
    ];
    for (const command of commands) {
      const result = await runCli([...command, '--database-url', db.url]);
      expect({ command, code: result.code, stderr: result.stderr }).toEqual({
        command,
        code: 1,
        stderr: `schema asset_webhooks is at version 0, older than this code's version ${codeVersion}: run \`asset-webhooks migrate\` first\n`,
      });
    }
  });
});

describe('the binding view check', () => {
  it('migrate refuses a binding file whose SQL fails, naming the file and the line, and installs none of it', async () => {
    const file = path.join(directory, 'failing-binding.sql');
    writeFileSync(file, 'create table public.first_thing (id bigint);\n\nselect nonsense\nfrom nowhere;\n');
    const result = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `--binding ${file}: expected SQL that runs on this database, got an error, line 4: ` +
        'relation "nowhere" does not exist (42P01) (nothing of the binding was installed)\n',
    );
    const { rows } = await db.pool.query("select to_regclass('public.first_thing')::text as table");
    expect(rows).toEqual([{ table: null }]);
  });

  it('migrate refuses a binding that ends the transaction itself, and installs none of it', async () => {
    const file = path.join(directory, 'committing-binding.sql');
    writeFileSync(file, 'create table public.before_commit (id bigint);\ncommit;\nselect 1/0;\n');
    const result = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      new RegExp(
        `^--binding ${file}: expected SQL that runs on this database, got an error: EXECUTE of transaction commands is not implemented \\(0A000\\) \\(nothing of the binding was installed\\)\\n$`,
      ),
    );
    const { rows } = await db.pool.query("select to_regclass('public.before_commit')::text as table");
    expect(rows).toEqual([{ table: null }]);
  });

  it('migrate refuses a binding whose view lacks a column or has a wrong type, and installs none of it', async () => {
    const file = path.join(directory, 'bad-binding.sql');
    writeFileSync(file, badView);
    const result = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
    expect(result.code).toBe(1);
    for (const problem of [...expectedProblems, noInTrash]) expect(result.stderr).toContain(problem);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    const { rows } = await db.pool.query(
      "select to_regclass('public.things')::text as things, to_regclass('asset_webhooks.asset_state')::text as view",
    );
    expect(rows).toEqual([{ things: null, view: null }]);
  });

  it('explain on a database without a binding says to install one, in one line (exit 1)', async () => {
    const config = path.join(directory, 'explain.yaml');
    writeFileSync(
      config,
      'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n',
    );
    expect((await runCli(['migrate', '--database-url', db.url])).code).toBe(0);
    const result = await explainAsset1(config);
    expect({ code: result.code, stderr: result.stderr }).toEqual({
      code: 1,
      stderr:
        'view asset_webhooks.asset_state: expected a binding to be installed, got none (run `asset-webhooks migrate --binding reference|FILE`)\n',
    });
  });

  it('migrate --binding reference warns of no capture gap; run warns of a capture trigger disabled since, naming table and trigger', async () => {
    // Migrated by the test above without a binding: nothing captures yet.
    expect(await captureGaps(db.pool)).toEqual([
      'capture triggers: expected triggers whose functions write to asset_webhooks.outbox, got none: no change of the assets is captured',
    ]);
    const installed = await runCli(['migrate', '--database-url', db.url, '--binding', 'reference']);
    expect({ code: installed.code, stderr: installed.stderr }).toEqual({ code: 0, stderr: '' });
    await db.pool.query('alter table public.asset_keywords disable trigger asset_webhooks_capture_update');
    try {
      const config = 'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n';
      expect(await startWarnings({ config, field: 'gap' })).toEqual([
        {
          msg: 'capture: changes can go uncaptured',
          gap:
            'table public.asset_keywords, capture triggers asset_webhooks_capture_update: expected enabled, got disabled: ' +
            'the changes they would capture are lost (ALTER TABLE ... ENABLE ALWAYS TRIGGER)',
        },
      ]);
    } finally {
      await db.pool.query('alter table public.asset_keywords enable always trigger asset_webhooks_capture_update');
    }
  });

  it('run refuses to start on a database whose view was changed by hand', async () => {
    expect((await runCli(['migrate', '--database-url', db.url, '--binding', 'reference'])).code).toBe(0);
    await db.pool.query('drop view asset_webhooks.asset_state');
    await db.pool.query(badView);
    const config = path.join(directory, 'config.yaml');
    writeFileSync(
      config,
      'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n',
    );
    const result = await runCli(['run', '--database-url', db.url, '--config', config]);
    expect(result.code).not.toBe(0);
    for (const problem of expectedProblems) expect(result.stderr).toContain(problem);
  });

  it(
    'a view without in_trash: migrate refuses it, naming the column; installed by an older release, run warns, explain reads it, backfill refuses',
    { timeout: 120_000 },
    async () => {
      await db.pool.query('drop view asset_webhooks.asset_state');
      const file = path.join(directory, 'binding-without-in-trash.sql');
      writeFileSync(file, viewWithoutInTrash);
      const refused = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
      expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: `${noInTrash}\n` });
      const { rows } = await db.pool.query("select to_regclass('asset_webhooks.asset_state')::text as view");
      expect(rows).toEqual([{ view: null }]);

      // As a release before the column left it.
      await db.pool.query(viewWithoutInTrash);
      await db.pool.query('insert into public.assets (asset_id) values (1) on conflict do nothing');
      const configText =
        'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n';
      const config = path.join(directory, 'old-binding.yaml');
      writeFileSync(config, configText);
      expect(await startWarnings({ config: configText, field: 'problem' })).toEqual([
        {
          msg: 'binding: backfill is refused, and only the capture tells a change in the Trash, until the view has this column',
          problem: noInTrash,
        },
      ]);

      const explained = await explainAsset1(config);
      expect({ code: explained.code, stderr: explained.stderr }).toEqual({ code: 0, stderr: '' });
      const backfilled = await runCli(['backfill', '--webhook', 'crm', '--config', config, '--database-url', db.url]);
      expect({ code: backfilled.code, stderr: backfilled.stderr }).toEqual({ code: 1, stderr: `${noInTrash}\n` });
    },
  );
});
