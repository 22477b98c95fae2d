import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tempDirectory = useTempDirectories();
const db = useTestDatabase();
let processes: CliProcess[] = [];
let receivers: TestReceiver[] = [];

beforeEach(() => resetData(db.pool));
afterEach(async () => {
  for (const p of processes) p.child.kill('SIGKILL');
  await Promise.all(processes.map((p) => p.exited));
  processes = [];
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  receivers.push(started);
  return started;
}

function run(configFile: string, extraArgs: string[] = ['--watch-config']): CliProcess {
  const started = startCli(['run', '--database-url', db.url, '--config', configFile, ...extraArgs], {
    LOG_LEVEL: 'info',
  });
  processes.push(started);
  return started;
}

function assetIds(target: TestReceiver): number[] {
  return target.requests.flatMap((r) =>
    (JSON.parse(r.body) as { events: { assetId: number }[] }).events.map((e) => e.assetId),
  );
}

function count(text: string, what: string): number {
  return text.split(what).length - 1;
}

/** Waits for the `n`th occurrence of a log message of the process. */
async function logged(proc: CliProcess, message: string, n = 1): Promise<void> {
  await eventually(
    async () => (count(proc.output.stderr, `"msg":"${message}"`) >= n ? true : undefined),
    20_000,
    `${n} × "${message}"`,
  );
}

/**
 * A Kubernetes ConfigMap volume: `config.yaml -> ..data/config.yaml`,
 * `..data -> ..<timestamp>`. An update writes a new timestamped directory,
 * points a new `..data_tmp` link at it, renames that over `..data` (atomic)
 * and removes the old directory: the file `config.yaml` itself never changes.
 */
class ConfigMapVolume {
  private generation = 0;
  private current: string | undefined;

  constructor(readonly directory: string) {}

  get path(): string {
    return path.join(this.directory, 'config.yaml');
  }

  update(yaml: string): void {
    this.generation += 1;
    const name = `..2026_01_01_00_00_0${this.generation}.000000001`;
    mkdirSync(path.join(this.directory, name));
    writeFileSync(path.join(this.directory, name, 'config.yaml'), yaml);
    symlinkSync(name, path.join(this.directory, '..data_tmp'));
    renameSync(path.join(this.directory, '..data_tmp'), path.join(this.directory, '..data'));
    if (this.current === undefined) symlinkSync(path.join('..data', 'config.yaml'), this.path);
    else rmSync(path.join(this.directory, this.current), { recursive: true });
    this.current = name;
  }
}

describe('run --watch-config', () => {
  it('picks up a ConfigMap-style symlink swap that moves a webhook to another receiver', async () => {
    const before = await receiver();
    const after = await receiver();
    const volume = new ConfigMapVolume(tempDirectory('aw-configmap-'));
    volume.update(receiverConfig([{ id: 'crm', url: before.url }]));
    const proc = run(volume.path);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await before.waitFor(1);

    volume.update(receiverConfig([{ id: 'crm', url: after.url }]));
    await logged(proc, 'configuration reloaded');
    await db.pool.query('insert into assets (asset_id) values (2)');
    await after.waitFor(1);
    expect(assetIds(after)).toEqual([2]);
    expect(assetIds(before)).toEqual([1]);
    expect(proc.output.stderr).toContain('"msg":"configuration file changed: reloading"');
  });

  it('picks up a write in place that enables a webhook, refuses an invalid document and keeps the one in use', async () => {
    const crm = await receiver();
    const shop = await receiver();
    const file = path.join(tempDirectory('aw-watch-'), 'config.yaml');
    writeFileSync(
      file,
      receiverConfig([
        { id: 'crm', url: crm.url },
        { id: 'shop', url: shop.url, enabled: false },
      ]),
    );
    const proc = run(file);
    await db.pool.query('insert into assets (asset_id) values (1)');
    await crm.waitFor(1);

    writeFileSync(
      file,
      receiverConfig([
        { id: 'crm', url: crm.url },
        { id: 'shop', url: shop.url, enabled: true },
      ]),
    );
    await logged(proc, 'configuration reloaded');
    await db.pool.query('insert into assets (asset_id) values (2)');
    await shop.waitFor(1);
    expect(assetIds(shop)).toEqual([2]);

    // A document that does not validate: refused, and both webhooks still deliver.
    writeFileSync(file, 'assetUpdater:\n  webhooks: [ { url: "not a url", enabled: true } ]\n');
    await logged(proc, 'invalid configuration: keeping the one in use');
    await db.pool.query('insert into assets (asset_id) values (3)');
    await eventually(
      async () => (assetIds(crm).includes(3) && assetIds(shop).includes(3) ? true : undefined),
      20_000,
      'asset 3 at both',
    );
    expect(count(proc.output.stderr, '"msg":"configuration reloaded"')).toBe(1);

    // Fixed: reloaded again, and shop disabled this time.
    writeFileSync(
      file,
      receiverConfig([
        { id: 'crm', url: crm.url },
        { id: 'shop', url: shop.url, enabled: false },
      ]),
    );
    await logged(proc, 'configuration reloaded', 2);
    await db.pool.query('insert into assets (asset_id) values (4)');
    await eventually(async () => (assetIds(crm).includes(4) ? true : undefined), 20_000, 'asset 4 at crm');
    // Coalesced after the reload: no payload for shop was made of it.
    const { rows } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'shop'",
    );
    expect(rows[0]!.n).toBe(shop.requests.length);
    expect(assetIds(shop)).not.toContain(4);
  });
});
