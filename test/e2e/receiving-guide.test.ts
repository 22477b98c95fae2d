import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const example = fileURLToPath(new URL('../../docs/examples/receiver-node.mjs', import.meta.url));
const KEY = `whsec_${randomBytes(32).toString('base64')}`;

let exampleReceiver: { child: ChildProcess; output: () => string } | undefined;
let run: CliProcess | undefined;

afterEach(async () => {
  for (const child of [run?.child, exampleReceiver?.child]) {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
  }
  run = undefined;
  exampleReceiver = undefined;
});

/** Starts docs/examples/receiver-node.mjs exactly as the guide says, on a free port; resolves with its port. */
async function startExample(): Promise<number> {
  const child = spawn(process.execPath, [example], {
    env: { ...process.env, WEBHOOK_SECRET: KEY, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  exampleReceiver = { child, output: () => output };
  const port = await eventually(async () => /listening on (\d+)/.exec(output)?.[1], {
    timeoutMs: 10_000,
    what: 'the example to listen',
  });
  return Number(port);
}

describe("docs/receiving.md's Node.js receiver", () => {
  it('verifies a real signed delivery from `run`, and refuses a forged one with a 4xx', async () => {
    await resetData(db.pool);
    const port = await startExample();
    const url = `http://127.0.0.1:${port}/asset-events`;
    const file = path.join(tempDirectory('aw-guide-'), 'config.yaml');
    writeFileSync(file, receiverConfig([{ id: 'guide', url, signing: { secret: 'guide-signing' } }]));
    run = startCli(['run', '--database-url', db.url, '--config', file], {
      env: {
        ASSET_WEBHOOKS_SECRET_GUIDE_SIGNING: KEY,
      },
    });

    const acceptedLines = (): string[] =>
      exampleReceiver!
        .output()
        .split('\n')
        .filter((line) => line.startsWith('accepted '));
    await db.pool.query('insert into assets (asset_id) values (1), (2)');
    await eventually(
      async () =>
        acceptedLines()
          .join('\n')
          .match(/upserted/g)?.length === 2
          ? true
          : undefined,
      { timeoutMs: 20_000, what: `the example to upsert two assets; it printed: ${exampleReceiver!.output()}` },
    );
    await db.pool.query('delete from assets where asset_id = 2');
    const accepted = await eventually(
      async () => (acceptedLines().some((line) => line.endsWith(': removed')) ? acceptedLines() : undefined),
      { timeoutMs: 20_000, what: 'the example to remove the purged asset' },
    );
    expect(accepted.join('\n')).toMatch(/^accepted msg_\S+ with \d+ events: /);
    const { rows } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
    expect(rows.length).toBeGreaterThan(0);
    await eventually(async () => {
      const { rows: current } = await db.pool.query<{ status: string }>('select status from asset_webhooks.payloads');
      return current.every((row) => row.status === 'delivered') ? true : undefined;
    });

    // The same body under a signature made with another key: the example must refuse it.
    const forged = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': 'msg_forged',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': `v1,${randomBytes(32).toString('base64')}`,
      },
      body: '{"count":0,"events":[],"webhookTimestamp":"2026-01-01T00:00:00.000Z"}',
    });
    expect(forged.status).toBe(401);
    expect(exampleReceiver!.output()).not.toContain('msg_forged');
  });

  it('removes an asset from its copy when a mirror webhook sends UNMATCHED', async () => {
    await resetData(db.pool);
    await db.pool.query('truncate asset_webhooks.mirror_members');
    const port = await startExample();
    const file = path.join(tempDirectory('aw-guide-'), 'config.yaml');
    writeFileSync(
      file,
      receiverConfig([
        {
          id: 'guide-copy',
          url: `http://127.0.0.1:${port}/asset-events`,
          signing: { secret: 'guide-signing' },
          mirror: true,
          filters: [{ filterKind: 'keywords', condition: 'ANY', value: ['shop'] }],
        },
      ]),
    );
    run = startCli(['run', '--database-url', db.url, '--config', file], {
      env: { ASSET_WEBHOOKS_SECRET_GUIDE_SIGNING: KEY },
    });
    const results = (): string =>
      exampleReceiver!
        .output()
        .split('\n')
        .filter((line) => line.startsWith('accepted '))
        .map((line) => line.replace(/^.*events: /, ''))
        .join(',');
    await db.pool.query('insert into assets (asset_id) values (1)');
    await db.pool.query("insert into asset_keywords (asset_id, value) values (1, 'shop')");
    await eventually(async () => (results().includes('upserted') ? true : undefined), {
      timeoutMs: 20_000,
      what: `the example to upsert the asset; it printed: ${exampleReceiver!.output()}`,
    });
    await db.pool.query("delete from asset_keywords where asset_id = 1 and value = 'shop'");
    await eventually(async () => (results().endsWith('removed') ? true : undefined), {
      timeoutMs: 20_000,
      what: `the example to remove the asset on UNMATCHED; it printed: ${exampleReceiver!.output()}`,
    });
  });
});
