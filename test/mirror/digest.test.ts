import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { receiverConfig } from '../helpers/config.js';
import { eventually, startTestReceiver } from '../helpers/receiver.js';
import { startRun, stopRun, untilRunning } from '../helpers/run-process.js';
import { resetData } from '../helpers/seed.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';
import type { ReceivedEvent } from './workload.js';

/**
 * `mirror digest` against the receiver's side of docs/mirror.md: a real `run`
 * process delivers to a real receiver that keeps its copy with the code of
 * docs/receiving.md, and the Node.js, Python and Go programs of docs/mirror.md,
 * taken from the page and run as it says, must print what `mirror digest
 * --json` prints. GO_COMMAND names the go binary (CI installs Debian's
 * golang-go and sets it, so a go that does not run fails here); without it, go
 * is taken from PATH, and where there is none the Go case is skipped.
 */

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const goCommand = process.env.GO_COMMAND || 'go';
const goAvailable = process.env.GO_COMMAND !== undefined || spawnSync(goCommand, ['version']).status === 0;

const docs = (page: string): string =>
  readFileSync(fileURLToPath(new URL(`../../docs/${page}`, import.meta.url)), 'utf8');

/** The fenced code blocks of `language` in the section of `page` that starts with `heading`. */
function codeBlocks(page: string, heading: string, language: string): string[] {
  const text = docs(page);
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/${page}: no section "${heading}"`);
  const end = text.indexOf('\n## ', start + heading.length + 2);
  const section = text.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1]!);
}

const RECEIVING_COPY = codeBlocks('receiving.md', '## Keeping a copy (mirror webhooks)', 'js');
const DIGEST_SECTION = '## Comparing copies: `mirror digest`';

interface GuideCopy {
  readonly copy: Map<string, { at: string; state: string }>;
  readonly apply: (event: ReceivedEvent) => void;
}

/** The receiver of docs/receiving.md: its copy and its `apply`, as the page writes them. */
function guideCopy(): GuideCopy {
  expect(RECEIVING_COPY).toHaveLength(1);
  return new Function(`${RECEIVING_COPY[0]}\nreturn { copy, apply };`)() as GuideCopy;
}

interface Digest {
  readonly count: number;
  readonly digest: string;
}

/** Runs the docs' program in `language` as the page says, the copy as JSON on its stdin; what it prints. */
function docsDigest(language: string, file: string, command: readonly string[], copyJson: string): Digest {
  const [code] = codeBlocks('mirror.md', DIGEST_SECTION, language);
  expect(code, `a ${language} block in docs/mirror.md`).toBeDefined();
  const program = path.join(tempDirectory('aw-digest-'), file);
  writeFileSync(program, code!);
  const [binary, ...args] = command;
  const out = execFileSync(binary!, [...args, program], { input: copyJson, encoding: 'utf8', timeout: 120_000 });
  return JSON.parse(out) as Digest;
}

const settled = async (): Promise<true | undefined> => {
  const {
    rows: [state],
  } = await db.pool.query<{ waiting: number; unsent: number }>(
    `select (select count(*)::int from asset_webhooks.outbox) as waiting,
            (select count(*)::int from asset_webhooks.payloads where status <> 'delivered') as unsent`,
  );
  return state!.waiting === 0 && state!.unsent === 0 ? true : undefined;
};

describe('mirror digest: the service and the receiver code of docs/mirror.md agree', () => {
  let service: Digest & { webhookId: string };
  let copyJson = '';
  let received: ReceivedEvent[] = [];

  beforeAll(async () => {
    await resetData(db.pool);
    const guide = guideCopy();
    const receiver = await startTestReceiver();
    receiver.respond = (request) => {
      for (const event of (JSON.parse(request.body) as { events: ReceivedEvent[] }).events) guide.apply(event);
      return 200;
    };
    const other = await startTestReceiver();
    const file = path.join(tempDirectory('aw-digest-'), 'config.yaml');
    const filters = [{ filterKind: 'keywords', condition: 'ANY', value: ['shop'] }];
    // `copy` takes no REVERSION and `other` does: an asset's last time sent to any mirror webhook
    // is then not the one `copy` got, and the digest must use the one `copy` got.
    writeFileSync(
      file,
      receiverConfig([
        {
          id: 'copy',
          url: receiver.url,
          mirror: true,
          concurrency: 2,
          batchSize: 3,
          filters,
          eventTypes: ['Created', 'Edited', 'Deleted', 'Purged'],
        },
        { id: 'other', url: other.url, mirror: true, filters },
      ]),
    );
    const run = startRun({ databaseUrl: db.url, configFile: file });
    try {
      await untilRunning(run);
      // Ids 1..12, so that byte order ("10" before "9") is not numeric order.
      for (let id = 1; id <= 12; id += 1) {
        await db.pool.query('insert into assets (asset_id, title) values ($1, $2)', [id, `asset ${id}`]);
        await db.pool.query("insert into asset_keywords (asset_id, value) values ($1, 'shop')", [id]);
      }
      await db.pool.query("insert into assets (asset_id, title) values (13, 'not for the shop')");
      await eventually(settled, { timeoutMs: 30_000, what: 'the creates delivered' });
      await db.pool.query("delete from asset_keywords where asset_id = 3 and value = 'shop'"); // UNMATCHED
      await db.pool.query('update assets set trashed_at = now() where asset_id = 4'); // DELETED: stays in the set
      await db.pool.query('delete from assets where asset_id = 5'); // PURGED
      await db.pool.query('update assets set latest_atom_id = 7 where asset_id in (6, 10)'); // REVERSION: `other` only
      await db.pool.query("update assets set title = 'edited' where asset_id in (7, 9)"); // EDITED
      await eventually(settled, { timeoutMs: 30_000, what: 'the changes delivered' });
    } finally {
      await stopRun(run);
      await receiver.close();
      await other.close();
    }
    received = receiver.requests.flatMap((request) => (JSON.parse(request.body) as { events: ReceivedEvent[] }).events);
    copyJson = JSON.stringify(Object.fromEntries(guide.copy));

    const result = await runCli(['mirror', 'digest', '--webhook', 'copy', '--json', '--config', file], {
      env: { DATABASE_URL: db.url },
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    service = JSON.parse(result.stdout) as typeof service;
  }, 120_000);

  it('counts the assets the receiver holds, in the Trash included, and the workload did what the test is about', async () => {
    expect(service).toEqual({ webhookId: 'copy', count: 10, digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(new Set(received.map((event) => event.eventType))).toEqual(
      new Set(['CREATED', 'UNMATCHED', 'DELETED', 'PURGED', 'EDITED']),
    );
    // The REVERSIONs moved the time last sent to any mirror webhook past the one `copy` holds.
    const { rows } = await db.pool.query<{ differ: number }>(
      `select count(*)::int as differ from asset_webhooks.mirror_members
       where asset_id in (6, 10) and sent_at ->> 'copy' <> to_char(last_event_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
    );
    expect(rows[0]!.differ).toBe(2);
  });

  it('Node.js: the docs program prints the same, and another for a copy one asset short', () => {
    expect(docsDigest('js', 'mirror-digest.mjs', [process.execPath], copyJson)).toEqual({
      count: service.count,
      digest: service.digest,
    });
    const short = JSON.parse(copyJson) as Record<string, unknown>;
    delete short['10'];
    expect(docsDigest('js', 'mirror-digest.mjs', [process.execPath], JSON.stringify(short)).digest).not.toBe(
      service.digest,
    );
  });

  // python3 from PATH, as the page says; a machine without it fails here, it does not skip.
  it('Python: the docs program prints the same', () => {
    expect(docsDigest('python', 'mirror_digest.py', ['python3'], copyJson)).toEqual({
      count: service.count,
      digest: service.digest,
    });
  });

  it.skipIf(!goAvailable)('Go: the docs program prints the same', () => {
    expect(docsDigest('go', 'mirror_digest.go', [goCommand, 'run'], copyJson)).toEqual({
      count: service.count,
      digest: service.digest,
    });
  });
});

it('prints one line without --json, and the digest of an empty set is the sha256 of nothing, as the docs program says', async () => {
  await resetData(db.pool);
  const file = path.join(tempDirectory('aw-digest-'), 'empty.yaml');
  writeFileSync(file, receiverConfig([{ id: 'fresh', url: 'http://127.0.0.1:9/hook', mirror: true }]));
  const text = await runCli(['mirror', 'digest', '--webhook', 'fresh', '--config', file, '--database-url', db.url]);
  const emptySha256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
  expect({ code: text.code, stdout: text.stdout, stderr: text.stderr }).toEqual({
    code: 0,
    stdout: `webhook fresh: 0 assets in its set, digest sha256:${emptySha256}\n`,
    stderr: '',
  });
  expect(docsDigest('js', 'mirror-digest.mjs', [process.execPath], '{}')).toEqual({ count: 0, digest: emptySha256 });
});

it('refuses, in one line, a webhook that is not a mirror one and an id the document lacks', async () => {
  const file = path.join(tempDirectory('aw-digest-'), 'plain.yaml');
  writeFileSync(file, receiverConfig([{ id: 'plain', url: 'http://127.0.0.1:9/hook' }]));
  const plain = await runCli(['mirror', 'digest', '--webhook', 'plain', '--config', file, '--database-url', db.url]);
  expect({ code: plain.code, stderr: plain.stderr }).toEqual({
    code: 1,
    stderr: '--webhook: expected a webhook with mirror: true, got plain, which keeps no set to digest\n',
  });
  const unknown = await runCli(['mirror', 'digest', '--webhook', 'shop', '--config', file, '--database-url', db.url]);
  expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({
    code: 1,
    stderr: '--webhook: expected one of plain, got "shop"\n',
  });
});
