import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpSender, type SenderOptions } from '../../../src/delivery/http/sender.js';
import { classifyResponse } from '../../../src/delivery/policy/classify.js';
import { startCli, type CliProcess } from '../../helpers/cli.js';
import { receiverConfig } from '../../helpers/config.js';
import { oneEventBody } from '../../helpers/payload-schema.js';
import { eventually, startTestReceiver, type TestReceiver } from '../../helpers/receiver.js';
import { useTempDirectories } from '../../helpers/temp-directories.js';
import { useTestDatabase } from '../../helpers/test-database.js';

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const proxyScript = fileURLToPath(new URL('../../helpers/connect-proxy.mjs', import.meta.url));

interface ProxyProcess {
  readonly url: string;
  readonly child: ChildProcess;
  lines(): string[];
}

/** Starts test/helpers/connect-proxy.mjs as its own process. */
async function startProxy(denyHosts: readonly string[] = []): Promise<ProxyProcess> {
  const child = spawn(process.execPath, [proxyScript], {
    env: { ...process.env, PROXY_DENY_HOSTS: denyHosts.join(',') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const port = await eventually(async () => /^listening (\d+)$/m.exec(output)?.[1], {
    timeoutMs: 10_000,
    what: 'the proxy to listen',
  });
  return { url: `http://127.0.0.1:${port}`, child, lines: () => output.split('\n').filter((line) => line !== '') };
}

let proxy: ProxyProcess;
let receiver: TestReceiver;
const senders: HttpSender[] = [];
const runs: CliProcess[] = [];

beforeAll(async () => {
  // The proxy's policy refuses the IP literal: the tests that must pass use the name localhost.
  proxy = await startProxy(['127.0.0.1']);
  receiver = await startTestReceiver();
});
afterAll(async () => {
  proxy.child.kill('SIGTERM');
  await receiver.close();
});
afterEach(async () => {
  await Promise.all(senders.splice(0).map((sender) => sender.close()));
  for (const run of runs.splice(0)) {
    run.child.kill('SIGTERM');
    await run.exited;
  }
});

function sender(options: Partial<SenderOptions>): HttpSender {
  const created = new HttpSender({ timeoutMs: 5_000, allowPrivateAddresses: true, ...options });
  senders.push(created);
  return created;
}

/** The receiver's url under the host name `localhost`, which the proxy resolves (the guard, here, too). */
const byName = (): string => receiver.url.replace('127.0.0.1', 'localhost');
const connectsTo = (target: string): string[] => proxy.lines().filter((line) => line.endsWith(` ${target}`));

describe('egress through an HTTP CONNECT proxy', () => {
  it('network.proxy: a delivery is tunnelled through the proxy, plain http included', async () => {
    const port = new URL(receiver.url).port;
    const before = receiver.requests.length;
    const result = await sender({ proxy: proxy.url }).post({ url: byName(), body: oneEventBody(), headers: {} });
    expect(result).toMatchObject({ kind: 'response', statusCode: 200 });
    expect(receiver.requests.length).toBe(before + 1);
    expect(connectsTo(`localhost:${port}`)).toContain(`CONNECT localhost:${port}`);
    expect(proxy.lines().filter((line) => line.startsWith('PLAIN'))).toEqual([]);
  });

  it('the address guard checks the name before the CONNECT: a refused address never reaches the proxy', async () => {
    const port = new URL(receiver.url).port;
    const seen = proxy.lines().length;
    const before = receiver.requests.length;
    const result = await sender({ proxy: proxy.url, allowPrivateAddresses: false }).post({
      url: byName(),
      body: oneEventBody(),
      headers: {},
    });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(proxy.lines().slice(seen)).toEqual([]);
    expect(receiver.requests.length).toBe(before);
    // An IP literal is refused the same way, without a look-up.
    const literal = await sender({ proxy: proxy.url, allowPrivateAddresses: false }).post({
      url: `http://169.254.169.254:${port}/latest`,
      body: oneEventBody(),
      headers: {},
    });
    expect(literal).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
    expect(proxy.lines().slice(seen)).toEqual([]);
  });

  it('a CONNECT the proxy refuses is a `proxy` error, retried', async () => {
    const result = await sender({ proxy: proxy.url }).post({
      url: receiver.url,
      body: oneEventBody(),
      headers: {},
    });
    expect(result).toMatchObject({ kind: 'error', errorClass: 'proxy' });
    expect(classifyResponse(result)).toBe('retryable');
    // The proxy's line arrives over a pipe: wait for it, so no later test counts it as its own.
    const target = `127.0.0.1:${new URL(receiver.url).port}`;
    await eventually(async () => (connectsTo(target).includes(`REFUSED ${target}`) ? true : undefined), {
      timeoutMs: 5_000,
      what: 'the refusal',
    });
  });

  it('HTTP_PROXY is honoured when network.proxy is unset, and NO_PROXY sends directly', async () => {
    const port = new URL(receiver.url).port;
    const seen = proxy.lines().length;
    const viaEnv = await sender({ env: { HTTP_PROXY: proxy.url } }).post({
      url: byName(),
      body: oneEventBody(),
      headers: {},
    });
    expect(viaEnv).toMatchObject({ kind: 'response', statusCode: 200 });
    expect(proxy.lines().slice(seen)).toEqual([`CONNECT localhost:${port}`]);

    const direct = await sender({ env: { HTTP_PROXY: proxy.url, NO_PROXY: 'localhost' } }).post({
      url: byName(),
      body: oneEventBody(),
      headers: {},
    });
    expect(direct).toMatchObject({ kind: 'response', statusCode: 200 });
    expect(proxy.lines().slice(seen)).toEqual([`CONNECT localhost:${port}`]);
    // Directly, the guard is the connect-time one: still applied.
    const guarded = await sender({
      env: { HTTP_PROXY: proxy.url, NO_PROXY: 'localhost' },
      allowPrivateAddresses: false,
    }).post({
      url: byName(),
      body: oneEventBody(),
      headers: {},
    });
    expect(guarded).toMatchObject({ kind: 'error', errorClass: 'address_refused' });
  });

  it('`run` with network.proxy in its document delivers through the proxy', async () => {
    const port = new URL(receiver.url).port;
    const seen = proxy.lines().length;
    const before = receiver.requests.length;
    const document = receiverConfig([{ id: 'crm', url: byName() }]).replace(
      'allowPrivateAddresses: true',
      `allowPrivateAddresses: true\n    proxy: ${proxy.url}`,
    );
    expect(document).toContain(`proxy: ${proxy.url}`);
    const file = path.join(tempDirectory('aw-proxy-'), 'config.yaml');
    writeFileSync(file, document);
    runs.push(startCli(['run', '--database-url', db.url, '--config', file]));
    await db.pool.query('insert into assets (asset_id) values (1)');
    await eventually(async () => (receiver.requests.length > before ? true : undefined), {
      timeoutMs: 20_000,
      what: 'a delivery',
    });
    expect(proxy.lines().slice(seen)).toContain(`CONNECT localhost:${port}`);
  });
});
