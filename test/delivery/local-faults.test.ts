import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { LOCAL_FAULT_RETRY_SECONDS } from '../../src/delivery/policy/next-state.js';
import { freePort } from '../../src/embedded/embedded-postgres.js';
import { cliPath } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { insertPayloads } from '../helpers/delivery.js';
import { tcpServer, type LocalServer } from '../helpers/http-servers.js';
import { eventually, startTestReceiver, type TestReceiver } from '../helpers/receiver.js';
import { resetData } from '../helpers/seed.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A real `run` process under a low file descriptor limit: requests to a
// receiver that never answers hold its descriptors, so the next request
// cannot open a socket (EMFILE). That is the process's fault, not the
// receiver's: the attempt is retried without counting against the retries,
// and the process says so in /metrics and /readyz.

const db = useTestDatabase();
/** The child's descriptor limit: the least it starts with (loading its modules opens many files at once). */
const FD_LIMIT = 256;
/** Webhooks whose receiver never answers, each with the most requests in flight a webhook may have: more than FD_LIMIT in all. */
const HOGS = ['hog1', 'hog2', 'hog3', 'hog4', 'hog5'];
const cleanups: Array<() => Promise<void>> = [];

beforeEach(async () => {
  await resetData(db.pool);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function openFds(pid: number): Promise<number> {
  return (await readdir(`/proc/${pid}/fd`)).length;
}

async function attempts(webhookId: string): Promise<Array<{ error_class: string | null; status_code: number | null }>> {
  const { rows } = await db.pool.query<{ error_class: string | null; status_code: number | null }>(
    `select a.error_class, a.status_code from asset_webhooks.attempts a join asset_webhooks.payloads p using (payload_id)
     where p.webhook_id = $1 and a.outcome is not null order by a.attempt_no`,
    [webhookId],
  );
  return rows;
}

it(
  'a run process out of file descriptors retries the attempt without using up its retries, and /readyz and /metrics say so',
  { timeout: 120_000 },
  async () => {
    // A receiver that accepts and never answers: each request to it holds a descriptor of the child.
    const held = new Set<Socket>();
    const hog: LocalServer = await tcpServer((socket) => {
      held.add(socket);
      socket.on('error', () => {});
    });
    cleanups.push(() => hog.close());
    const crm: TestReceiver = await startTestReceiver();
    cleanups.push(() => crm.close());
    // Once descriptors are back, the receiver fails once: the one retry delaysSeconds allows must still be there.
    crm.respond = (_request, index) => (index === 0 ? 503 : 200);

    const directory = await mkdtemp(join(tmpdir(), 'aw-local-faults-'));
    cleanups.push(() => rm(directory, { recursive: true, force: true }));
    const file = join(directory, 'config.yaml');
    await writeFile(
      file,
      receiverConfig(
        [{ id: 'crm', url: crm.url }, ...HOGS.map((id) => ({ id, url: `${hog.origin}/hook`, concurrency: 64 }))],
        { intervalSeconds: null, requestTimeoutSeconds: 120, retry: { delaysSeconds: [1] } },
      ),
    );
    const port = await freePort();
    const child = spawn(
      'sh',
      [
        '-c',
        `ulimit -n ${FD_LIMIT} && exec "$0" "$@"`,
        process.execPath,
        cliPath,
        'run',
        '--config',
        file,
        '--http-port',
        String(port),
      ],
      { env: { ...process.env, DATABASE_URL: db.url }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    child.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    cleanups.push(async () => {
      child.kill('SIGKILL');
      await exited;
    });
    const readyz = async (): Promise<{ status: number; body: { status: string; check?: string; reason?: string } }> => {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: response.status, body: (await response.json()) as { status: string } };
    };
    await eventually(async () => ((await readyz().catch(() => undefined))?.status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: 'run to be ready',
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}; its log: ${log.slice(-2000)}`);
    });
    const pid = child.pid!;

    // Fill the child's descriptors with requests that hang.
    for (const id of HOGS) await insertPayloads(db.pool, id, 64);
    await eventually(async () => ((await openFds(pid)) >= FD_LIMIT - 1 ? true : undefined), {
      timeoutMs: 20_000,
      what: 'descriptors full',
    });
    const [payloadId] = await insertPayloads(db.pool, 'crm', 1);

    // Its attempts fail for want of a descriptor: the first, and its retry LOCAL_FAULT_RETRY_SECONDS later,
    // both started (counted at the claim) while the descriptors are still full. (Whether their results can
    // be written meanwhile depends on which descriptors the process frees and takes again: a result that
    // cannot be written is kept until it can.)
    await eventually(
      async () => {
        const { rows } = await db.pool.query<{ attempts: number }>(
          'select attempts from asset_webhooks.payloads where payload_id = $1',
          [payloadId],
        );
        return (rows[0]?.attempts ?? 0) >= 2 ? true : undefined;
      },
      { timeoutMs: (LOCAL_FAULT_RETRY_SECONDS + 20) * 1000, what: 'the first attempt and its retry' },
    );

    // The descriptors come back: the receiver that never answered hangs up.
    for (const socket of held) socket.destroy();
    await hog.close();

    // One retry is configured: a local fault and the receiver's 503 would have used up two.
    const settled = await eventually(
      async () => {
        const { rows } = await db.pool.query<{ status: string }>(
          'select status, dead_letter_reason from asset_webhooks.payloads where payload_id = $1',
          [payloadId],
        );
        return rows[0]?.status === 'pending' ? undefined : rows[0];
      },
      { timeoutMs: 30_000, what: 'the payload to be delivered or dead-lettered' },
    );
    expect(settled).toEqual({ status: 'delivered', dead_letter_reason: null });
    const notReady = await eventually<{ status: number; body: { status: string; check?: string; reason?: string } }>(
      async () => {
        const answer = await readyz().catch(() => undefined);
        return answer?.status === 503 ? answer : undefined;
      },
      { timeoutMs: 20_000, what: '/readyz to answer 503' },
    );
    expect(notReady.body).toMatchObject({ status: 'unavailable', check: 'local_resources' });
    expect(notReady.body.reason).toMatch(/file descriptors or memory/);
    // Asked until a scrape counts crm's fault: the series exists at 0 from the start, and
    // /readyz's fault may be a hog's, whose attempts run out of descriptors too.
    const faults = await eventually(
      async () => {
        const metrics = await fetch(`http://127.0.0.1:${port}/metrics`)
          .then((response) => response.text())
          .catch(() => '');
        const count = /^asset_webhooks_delivery_local_faults_total\{webhook="crm"\} (\d+)$/m.exec(metrics);
        return count === null || Number(count[1]) < 1 ? undefined : Number(count[1]);
      },
      { timeoutMs: 10_000, what: 'the local faults counted in /metrics' },
    );
    expect(faults).toBeGreaterThanOrEqual(1);

    const made = await attempts('crm');
    // Local faults, then the receiver's 503 (its one retry), then its 200.
    expect(made.slice(-2)).toEqual([
      { error_class: null, status_code: 503 },
      { error_class: null, status_code: 200 },
    ]);
    expect(made.length).toBeGreaterThanOrEqual(3);
    expect(made.slice(0, -2).every((a) => a.error_class === 'local_fault')).toBe(true);
    child.kill('SIGTERM');
    await exited;
  },
);
