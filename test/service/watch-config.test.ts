import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { startCli, type CliProcess } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { twoCoalescingRunsSince } from '../helpers/coalesce-runs.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tempDirectory = useTempDirectories();
const db = useTestDatabase();
const cleanup = useCleanup();

beforeEach(() => resetData(db.pool));

async function receiver(): Promise<TestReceiver> {
  const started = await startTestReceiver();
  cleanup.close(started);
  return started;
}

function run(configFile: string, extraArgs: string[] = ['--watch-config'], logLevel = 'info'): CliProcess {
  const started = startCli(['run', '--database-url', db.url, '--config', configFile, ...extraArgs], {
    env: {
      LOG_LEVEL: logLevel,
    },
  });
  cleanup.process(started);
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

/** Polls of --watch-config ended so far: each logs one line (unchanged at debug level, changed, or unusable). */
function watchPolls(proc: CliProcess): number {
  return (
    proc.output.stderr.match(/"msg":"configuration file (unchanged|changed: reloading|unusable: reloading)/g)?.length ??
    0
  );
}

/** Waits for the `n`th occurrence of a log message of the process. */
async function logged(proc: CliProcess, message: string, n = 1): Promise<void> {
  await eventually(async () => (count(proc.output.stderr, `"msg":"${message}"`) >= n ? true : undefined), {
    timeoutMs: 20_000,
    what: `${n} × "${message}"`,
  });
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
    this.updateWith((file) => writeFileSync(file, yaml));
  }

  /** An update whose config.yaml `make` creates: a FIFO, a symbolic link to a device, a huge file. */
  updateWith(make: (file: string) => void): void {
    this.generation += 1;
    const name = `..2026_01_01_00_00_${String(this.generation).padStart(2, '0')}.000000001`;
    mkdirSync(path.join(this.directory, name));
    make(path.join(this.directory, name, 'config.yaml'));
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
    await twoCoalescingRunsSince(db.pool);
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
    await twoCoalescingRunsSince(db.pool);
    await db.pool.query('insert into assets (asset_id) values (2)');
    await shop.waitFor(1);
    expect(assetIds(shop)).toEqual([2]);

    // A document that does not validate: refused, and both webhooks still deliver.
    writeFileSync(file, 'assetUpdater:\n  webhooks: [ { url: "not a url", enabled: true } ]\n');
    await logged(proc, 'invalid configuration: keeping the one in use');
    await db.pool.query('insert into assets (asset_id) values (3)');
    await eventually(async () => (assetIds(crm).includes(3) && assetIds(shop).includes(3) ? true : undefined), {
      timeoutMs: 20_000,
      what: 'asset 3 at both',
    });
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
    await twoCoalescingRunsSince(db.pool);
    await db.pool.query('insert into assets (asset_id) values (4)');
    await eventually(async () => (assetIds(crm).includes(4) ? true : undefined), {
      timeoutMs: 20_000,
      what: 'asset 4 at crm',
    });
    // Coalesced after the reload: no payload for shop was made of it.
    const { rows } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from asset_webhooks.payloads where webhook_id = 'shop'",
    );
    expect(rows[0]!.n).toBe(shop.requests.length);
    expect(assetIds(shop)).not.toContain(4);
  });
});

describe('run --watch-config when the path holds something other than a configuration file', () => {
  /** The value of a metric without labels on the process's /metrics, or undefined when it has none. */
  async function metric(port: number, name: string): Promise<number | undefined> {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  }

  /** Waits for the metric to read `value`: /metrics serves one rendering for up to a second. */
  async function metricBecomes(port: number, name: string, value: number): Promise<void> {
    await eventually(async () => ((await metric(port, name)) === value ? true : undefined), {
      timeoutMs: 5_000,
      what: `${name} ${value}`,
    });
  }

  it.for([
    ['a FIFO', (file: string) => execFileSync('mkfifo', [file])],
    ['a symbolic link to /dev/zero', (file: string) => symlinkSync('/dev/zero', file)],
    ['a sparse file of 1.5 GB', (file: string) => (writeFileSync(file, ''), truncateSync(file, 1.5 * 1024 ** 3))],
  ] as const)(
    '%s: never read, the configuration in use stays with a metric saying so, a valid document after it is loaded, and SIGTERM ends the process',
    { timeout: 120_000 },
    async ([, make]) => {
      const before = await receiver();
      const after = await receiver();
      const volume = new ConfigMapVolume(tempDirectory('aw-configmap-'));
      volume.update(receiverConfig([{ id: 'crm', url: before.url }]));
      const port = await freePort();
      const proc = run(volume.path, ['--watch-config', '--http-port', String(port)], 'debug');
      await db.pool.query('insert into assets (asset_id) values (1)');
      await before.waitFor(1);
      await metricBecomes(port, 'asset_webhooks_config_file_unusable', 0);

      volume.updateWith(make);
      await logged(proc, 'invalid configuration: keeping the one in use');
      expect(proc.output.stderr).toMatch(
        /config\.yaml: expected a regular file \(the path may be a symbolic link to one\), got a (FIFO|character device)|config\.yaml: expected a configuration document of at most 4194304 bytes \(4 MiB\), got 1610612736 bytes/,
      );
      await metricBecomes(port, 'asset_webhooks_config_file_unusable', 1);
      // SIGHUPs read the path too: each is refused at once, and none waits on a FIFO in libuv's thread pool.
      for (let n = 2; n <= 6; n += 1) {
        proc.child.kill('SIGHUP');
        await logged(proc, 'invalid configuration: keeping the one in use', n);
      }
      // Still delivering with the configuration in use.
      await db.pool.query('insert into assets (asset_id) values (2)');
      await eventually(async () => (assetIds(before).includes(2) ? true : undefined), {
        timeoutMs: 20_000,
        what: 'asset 2 at the first receiver',
      });
      // Unchanged, the file is not reloaded again (nor read: a FIFO or a device would hang or never end):
      // two more polls of the watcher end, the second begun after this point.
      const polled = watchPolls(proc);
      await eventually(async () => (watchPolls(proc) >= polled + 2 ? true : undefined), {
        timeoutMs: 20_000,
        what: 'two more polls of the watcher',
      });
      expect(count(proc.output.stderr, '"msg":"invalid configuration: keeping the one in use"')).toBe(6);

      // A valid document afterwards is loaded; its receiver is reached by host name, so DNS lookups still get a thread.
      volume.update(receiverConfig([{ id: 'crm', url: after.url.replace('127.0.0.1', 'localhost') }]));
      await logged(proc, 'configuration reloaded');
      await metricBecomes(port, 'asset_webhooks_config_file_unusable', 0);
      await twoCoalescingRunsSince(db.pool);
      await db.pool.query('insert into assets (asset_id) values (3)');
      await eventually(async () => (assetIds(after).includes(3) ? true : undefined), {
        timeoutMs: 20_000,
        what: 'asset 3 at the second receiver',
      });

      proc.child.kill('SIGTERM');
      const exited = await Promise.race([
        proc.exited,
        new Promise((resolve) => setTimeout(() => resolve('still running 15 s after SIGTERM'), 15_000)),
      ]);
      expect(exited).toBe(0);
    },
  );
});

describe('run reloading a document that is costly to parse', () => {
  it(
    'keeps answering /livez within 2 s while a reload refuses 4 MB of nested lists, or checks a document near the node limit',
    { timeout: 120_000 },
    async () => {
      const crm = await receiver();
      const file = path.join(tempDirectory('aw-costly-'), 'config.yaml');
      const valid = receiverConfig([{ id: 'crm', url: crm.url }]);
      writeFileSync(file, valid);
      const port = await freePort();
      const proc = run(file, ['--http-port', String(port)]);
      await logged(proc, 'asset-webhooks running');

      /** Sends SIGHUP and asks /livez every 100 ms, each answer within 2 s, until the reload's outcome is logged. */
      const reloadWhileProbing = async (outcome: string, n: number): Promise<number> => {
        proc.child.kill('SIGHUP');
        let probes = 0;
        while (count(proc.output.stderr, `"msg":"${outcome}"`) < n) {
          const response = await fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(2000) });
          expect(response.status).toBe(200);
          probes += 1;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return probes;
      };

      writeFileSync(file, `assetUpdater: ${'['.repeat(2_000_000)}${']'.repeat(2_000_000)}\n`);
      await reloadWhileProbing('invalid configuration: keeping the one in use', 1);
      expect(proc.output.stderr).toContain('expected collections nested at most 64 deep, got deeper');

      // Within every limit, yet seconds of parsing: checked off the event loop, then refused by the schema.
      const values = Array.from({ length: 99_000 }, (_, index) => `"v${index}"`).join(', ');
      writeFileSync(
        file,
        valid.replace('webhooks:', `webhooks:\n    - ${'{'} url: "x", enabled: true, resourceTypes: [${values}] }`),
      );
      await reloadWhileProbing('invalid configuration: keeping the one in use', 2);
      expect(proc.output.stderr).toContain('assetUpdater.webhooks[0].url: expected an http or https URL, got \\"x\\"');

      writeFileSync(file, receiverConfig([{ id: 'crm', url: crm.url, batchSize: 5 }]));
      await reloadWhileProbing('configuration reloaded', 1);
    },
  );
});
