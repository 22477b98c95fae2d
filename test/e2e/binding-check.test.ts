import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPool } from '../../src/db/connect.js';
import { runCli } from '../helpers/cli.js';
import { databaseUrlFor } from '../helpers/database-url.js';

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

const name = `aw_bindcheck_${process.pid}_${Date.now().toString(36)}`;
let url: string;
let pool: pg.Pool;
let directory: string;

beforeAll(async () => {
  const admin = createPool(inject('serverUrl'), { max: 1 });
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  url = databaseUrlFor(inject('serverUrl'), name);
  pool = createPool(url, { max: 2 });
  directory = mkdtempSync(path.join(os.tmpdir(), 'aw-bindcheck-'));
});

afterAll(async () => {
  await pool?.end();
  rmSync(directory, { recursive: true, force: true });
  const admin = createPool(inject('serverUrl'), { max: 1 });
  try {
    await admin.query(`drop database if exists ${name} with (force)`);
  } finally {
    await admin.end();
  }
});

const expectedProblems = [
  'view asset_webhooks.asset_state, column keywords: expected text[], got text',
  'view asset_webhooks.asset_state, column field_values: expected text[], got no such column',
];

describe('the binding view check', () => {
  it('migrate refuses a binding whose view lacks a column or has a wrong type, and installs none of it', async () => {
    const file = path.join(directory, 'bad-binding.sql');
    writeFileSync(file, badView);
    const result = await runCli(['migrate', '--database-url', url, '--binding', file]);
    expect(result.code).toBe(1);
    for (const problem of expectedProblems) expect(result.stderr).toContain(problem);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    const { rows } = await pool.query("select to_regclass('public.things')::text as things, to_regclass('asset_webhooks.asset_state')::text as view");
    expect(rows).toEqual([{ things: null, view: null }]);
  });

  it('run refuses to start on a database whose view was changed by hand', async () => {
    expect((await runCli(['migrate', '--database-url', url, '--binding', 'reference'])).code).toBe(0);
    await pool.query('drop view asset_webhooks.asset_state');
    await pool.query(badView);
    const config = path.join(directory, 'config.yaml');
    writeFileSync(config, 'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://crm.example/hook", enabled: true }\n');
    const result = await runCli(['run', '--database-url', url, '--config', config]);
    expect(result.code).not.toBe(0);
    for (const problem of expectedProblems) expect(result.stderr).toContain(problem);
  });
});
