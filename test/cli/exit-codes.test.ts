import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../helpers/cli.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * Every command's exit status and error line (CONTRACT, command line): 0
 * success, 1 a user error (invalid configuration, unknown id, database
 * unreachable), 2 bad usage; an error is one line on stderr naming what is
 * wrong and what was expected, never a stack trace. The real CLI as child
 * processes, a few at a time, started once for the whole table.
 */

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
const db = useTestDatabase();
const tempDirectory = useTempDirectories();
/** Nothing listens on port 1: the connection is refused at once. */
const UNREACHABLE = 'postgres://postgres@127.0.0.1:1/assets';
const UNREACHABLE_LINE =
  'database postgres://postgres@127.0.0.1:1/assets: expected a reachable PostgreSQL server, got connect ECONNREFUSED 127.0.0.1:1';
const NO_DATABASE_LINE =
  '--database-url: expected a PostgreSQL URL (or the environment variable DATABASE_URL), got nothing';
const NO_CONFIG_LINE =
  '--config: expected a configuration file (or the environment variable ASSET_WEBHOOKS_CONFIG), got nothing';
const usage = (message: string) => `error: ${message} (run with --help for usage)`;
const EVENT_ID = '00000000-0000-4000-8000-000000000000';
/** Running at most this many at once keeps the machine's other work going. */
const BATCH = 4;

const directory = tempDirectory('aw-exit-codes-');
const config = path.join(directory, 'valid.yaml');
writeFileSync(
  config,
  'assetUpdater:\n  webhooks:\n    - { id: crm, url: "https://receiver.example/a", enabled: true }\n',
);
const invalid = path.join(directory, 'invalid.yaml');
writeFileSync(
  invalid,
  'assetUpdater:\n  intervalSeconds: 0\n  webhooks:\n    - { id: crm, url: "https://receiver.example/a", enabled: true }\n',
);

interface Row {
  readonly command: string;
  readonly what: string;
  readonly args: () => readonly string[];
  readonly code: 0 | 1 | 2;
  /** Failures: the one line on stderr. Success: what stdout says (whole), and stderr is empty. */
  readonly line: string | RegExp;
}

const rows: readonly Row[] = [
  {
    command: '(none)',
    what: 'an unknown option',
    args: () => ['--bogus'],
    code: 2,
    line: usage("unknown option '--bogus'"),
  },
  {
    command: '(none)',
    what: 'an unknown command',
    args: () => ['frobnicate'],
    code: 2,
    line: usage("unknown command 'frobnicate'"),
  },
  {
    command: '--version',
    what: 'success',
    args: () => ['--version'],
    code: 0,
    line: new RegExp(`^${packageJson.version.replaceAll('.', '\\.')}\\n$`),
  },

  {
    command: 'migrate',
    what: 'a misspelt option, with the suggestion on the same line',
    args: () => ['migrate', '--bindng', 'reference'],
    code: 2,
    line: usage("unknown option '--bindng' (Did you mean --binding?)"),
  },
  { command: 'migrate', what: 'no database given', args: () => ['migrate'], code: 1, line: NO_DATABASE_LINE },
  {
    command: 'migrate',
    what: 'an unreachable database',
    args: () => ['migrate', '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },
  {
    command: 'migrate',
    what: 'success (already up to date)',
    args: () => ['migrate', '--database-url', db.url],
    code: 0,
    line: /^schema asset_webhooks at version \d+ \(already up to date\), functions [0-9a-f]+\n$/,
  },

  {
    command: 'run',
    what: 'a port that is not a number',
    args: () => ['run', '--http-port', 'abc'],
    code: 2,
    line: usage('--http-port: expected an integer from 0 to 65535, got "abc"'),
  },
  {
    command: 'run',
    what: '--concurrency out of range',
    args: () => ['run', '--concurrency', '0'],
    code: 2,
    line: usage('--concurrency: expected an integer from 1 to 256, got "0"'),
  },
  {
    command: 'run',
    what: '--http-host without --http-port',
    args: () => ['run', '--http-host', '127.0.0.1'],
    code: 2,
    line: usage('--http-host: expected together with --http-port, got "127.0.0.1" alone'),
  },
  {
    command: 'run',
    what: 'no configuration given',
    args: () => ['run', '--database-url', UNREACHABLE],
    code: 1,
    line: NO_CONFIG_LINE,
  },
  {
    command: 'run',
    what: 'an unreachable database',
    args: () => ['run', '--database-url', UNREACHABLE, '--config', config],
    code: 1,
    line: UNREACHABLE_LINE,
  },

  {
    command: 'check-config',
    what: 'an unknown option',
    args: () => ['check-config', config, '--strict'],
    code: 2,
    line: usage("unknown option '--strict'"),
  },
  {
    command: 'check-config',
    what: 'two different files',
    args: () => ['check-config', config, '--config', invalid],
    code: 2,
    line: usage(`--config: expected the same file as the argument "${config}", or only one of them, got "${invalid}"`),
  },
  { command: 'check-config', what: 'no file given', args: () => ['check-config'], code: 1, line: NO_CONFIG_LINE },
  {
    command: 'check-config',
    what: 'an invalid document',
    args: () => ['check-config', invalid],
    code: 1,
    line: 'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 0',
  },
  {
    command: 'check-config',
    what: 'success',
    args: () => ['check-config', config],
    code: 0,
    line: /^\/.*\/valid\.yaml: valid, 1 webhook\(s\) \(1 enabled\): crm; interval 60s\n$/,
  },

  {
    command: 'explain',
    what: 'a missing required option',
    args: () => ['explain', '--asset', '1'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'explain',
    what: 'an asset id that is not a number',
    args: () => ['explain', '--webhook', 'crm', '--asset', 'abc'],
    code: 2,
    line: usage(
      '--asset: expected an integer from -9223372036854775808 to 9223372036854775807 in decimal digits, got "abc"',
    ),
  },
  {
    command: 'explain',
    what: 'a webhook the document lacks',
    args: () => ['explain', '--webhook', 'shop', '--asset', '1', '--config', config, '--database-url', db.url],
    code: 1,
    line: '--webhook: expected one of crm, got "shop"',
  },
  {
    command: 'explain',
    what: 'an unreachable database',
    args: () => ['explain', '--webhook', 'crm', '--asset', '1', '--config', config, '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },

  {
    command: 'trace',
    what: 'a missing EVENT_ID',
    args: () => ['trace'],
    code: 2,
    line: usage("missing required argument 'EVENT_ID'"),
  },
  {
    command: 'trace',
    what: 'an EVENT_ID that is not a UUID',
    args: () => ['trace', 'abc'],
    code: 2,
    line: usage('EVENT_ID: expected a UUID, got "abc"'),
  },
  {
    command: 'trace',
    what: 'an unreachable database',
    args: () => ['trace', EVENT_ID, '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },
  {
    command: 'trace',
    what: 'an unknown event',
    args: () => ['trace', EVENT_ID, '--database-url', db.url],
    code: 1,
    line: `event ${EVENT_ID}: expected an eventId captured within the retention period, got none (not in the outbox or the consumed events)`,
  },

  {
    command: 'events',
    what: 'a missing required option',
    args: () => ['events', '--to', '2026-01-02'],
    code: 2,
    line: usage("required option '--from <time>' not specified"),
  },
  {
    command: 'events',
    what: 'a bad time',
    args: () => ['events', '--from', 'yesterday', '--to', '2026-01-02'],
    code: 2,
    line: usage(
      '--from: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got "yesterday"',
    ),
  },
  {
    command: 'events',
    what: 'a day that does not exist',
    args: () => ['events', '--from', '2026-02-30', '--to', '2026-03-02'],
    code: 2,
    line: usage(
      '--from: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got "2026-02-30"',
    ),
  },
  {
    command: 'events',
    what: '--from after --to',
    args: () => ['events', '--from', '2026-01-02', '--to', '2026-01-01'],
    code: 2,
    line: usage('--from: expected a time before --to (2026-01-01T00:00:00.000Z), got 2026-01-02T00:00:00.000Z'),
  },
  {
    command: 'events',
    what: 'success',
    args: () => ['events', '--from', '2026-01-01', '--to', '2026-01-02', '--database-url', db.url],
    code: 0,
    line: /^no events in this window\n$/,
  },

  {
    command: 'dead-letters',
    what: 'a misspelt option',
    args: () => ['dead-letters', '--webhok', 'crm'],
    code: 2,
    line: usage("unknown option '--webhok' (Did you mean --webhook?)"),
  },
  {
    command: 'dead-letters',
    what: 'an unreachable database',
    args: () => ['dead-letters', '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },
  {
    command: 'dead-letters',
    what: 'an unknown webhook',
    args: () => ['dead-letters', '--webhook', 'shop', '--database-url', db.url],
    code: 1,
    line: '--webhook: expected the id of a webhook the service has run with (none yet: has `run` started with this configuration?), got "shop"',
  },
  {
    command: 'dead-letters',
    what: 'success',
    args: () => ['dead-letters', '--database-url', db.url],
    code: 0,
    line: /^the dead-letter store is empty\n$/,
  },

  {
    command: 'dead-letters redeliver',
    what: 'neither PAYLOAD_ID nor --webhook',
    args: () => ['dead-letters', 'redeliver'],
    code: 2,
    line: usage(
      'PAYLOAD_ID: expected PAYLOAD_ID (one payload) or --webhook ID (every dead letter of a webhook), got neither',
    ),
  },
  {
    command: 'dead-letters redeliver',
    what: 'a PAYLOAD_ID that is not a number',
    args: () => ['dead-letters', 'redeliver', 'abc'],
    code: 2,
    line: usage('PAYLOAD_ID: expected an integer from 1 to 9007199254740991, got "abc"'),
  },
  {
    command: 'dead-letters redeliver',
    what: 'an unreachable database',
    args: () => ['dead-letters', 'redeliver', '5', '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },

  {
    command: 'backfill',
    what: 'a missing required option',
    args: () => ['backfill'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'backfill',
    what: 'a webhook the document lacks',
    args: () => ['backfill', '--webhook', 'shop', '--config', config, '--database-url', db.url],
    code: 1,
    line: '--webhook: expected one of crm, got "shop"',
  },

  {
    command: 'reconcile',
    what: 'a missing required option',
    args: () => ['reconcile'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'reconcile',
    what: 'no configuration given',
    args: () => ['reconcile', '--webhook', 'crm', '--database-url', UNREACHABLE],
    code: 1,
    line: NO_CONFIG_LINE,
  },

  {
    command: 'replay',
    what: 'a missing required option',
    args: () => ['replay', '--from', '2026-11-20T00:00:00Z', '--to', '2026-11-21'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'replay',
    what: 'no window',
    args: () => ['replay', '--webhook', 'crm'],
    code: 2,
    line: usage("required option '--from <time>' not specified"),
  },
  {
    command: 'replay',
    what: 'a time that is not one',
    args: () => ['replay', '--webhook', 'crm', '--from', 'yesterday', '--to', '2026-11-21'],
    code: 2,
    line: usage(
      '--from: expected an ISO-8601 time such as 2026-11-22T09:00:00Z (UTC when no offset is given), got "yesterday"',
    ),
  },
  {
    command: 'replay',
    what: '--to before --from',
    args: () => ['replay', '--webhook', 'crm', '--from', '2026-11-21', '--to', '2026-11-20', '--database-url', db.url],
    code: 2,
    line: usage('--from: expected a time before --to (2026-11-20T00:00:00.000Z), got 2026-11-21T00:00:00.000Z'),
  },
  {
    command: 'replay',
    what: 'an event type payloads never carry',
    args: () => ['replay', '--webhook', 'crm', '--from', '2026-11-20', '--to', '2026-11-21', '--event-type', 'MOVED'],
    code: 2,
    line: usage('--event-type: expected one of CREATED, EDITED, DELETED, PURGED, REVERSION, UNMATCHED, got "MOVED"'),
  },
  {
    command: 'replay',
    what: 'an asset id that is not one',
    args: () => ['replay', '--webhook', 'crm', '--from', '2026-11-20', '--to', '2026-11-21', '--asset', '1x'],
    code: 2,
    line: usage(
      '--asset: expected an integer from -9223372036854775808 to 9223372036854775807 in decimal digits, got "1x"',
    ),
  },
  {
    command: 'replay',
    what: 'an unreachable database',
    args: () => [
      'replay',
      '--webhook',
      'crm',
      '--from',
      '2026-11-20',
      '--to',
      '2026-11-21',
      '--database-url',
      UNREACHABLE,
    ],
    code: 1,
    line: UNREACHABLE_LINE,
  },
  {
    command: 'replay',
    what: 'a webhook the service never ran with',
    args: () => [
      'replay',
      '--webhook',
      'nosuch',
      '--from',
      '2026-11-20',
      '--to',
      '2026-11-21',
      '--database-url',
      db.url,
    ],
    code: 1,
    line: '--webhook: expected the id of a webhook the service has run with (none yet: has `run` started with this configuration?), got "nosuch"',
  },

  {
    command: 'demo',
    what: 'a duration that is not a number',
    args: () => ['demo', '--duration', 'soon'],
    code: 2,
    line: usage('--duration: expected an integer from 1 to 86400, got "soon"'),
  },
  {
    command: 'resume',
    what: 'no --webhook',
    args: () => ['resume'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'resume',
    what: 'an unreachable database',
    args: () => ['resume', '--webhook', 'crm', '--database-url', UNREACHABLE],
    code: 1,
    line: UNREACHABLE_LINE,
  },
  {
    command: 'resume',
    what: 'a webhook the service never ran with',
    args: () => ['resume', '--webhook', 'nosuch', '--database-url', db.url],
    code: 1,
    line: '--webhook: expected the id of a webhook the service has run with (none yet: has `run` started with this configuration?), got "nosuch"',
  },

  {
    command: 'mirror digest',
    what: 'no --webhook',
    args: () => ['mirror', 'digest'],
    code: 2,
    line: usage("required option '--webhook <id>' not specified"),
  },
  {
    command: 'mirror digest',
    what: 'a webhook the document does not have',
    args: () => ['mirror', 'digest', '--webhook', 'nosuch', '--config', config, '--database-url', db.url],
    code: 1,
    line: '--webhook: expected one of crm, got "nosuch"',
  },
  {
    command: 'mirror digest',
    what: 'a plain webhook',
    args: () => ['mirror', 'digest', '--webhook', 'crm', '--config', config, '--database-url', db.url],
    code: 1,
    line: '--webhook: expected a webhook with mirror: true, got crm, which keeps no set to digest',
  },
];

const results = new Map<Row, CliResult>();

beforeAll(async () => {
  // No DATABASE_URL or ASSET_WEBHOOKS_CONFIG of this machine's: each row gives what it means to.
  const env = { DATABASE_URL: '', ASSET_WEBHOOKS_CONFIG: '' };
  for (let start = 0; start < rows.length; start += BATCH) {
    const batch = rows.slice(start, start + BATCH);
    const done = await Promise.all(batch.map((row) => runCli(row.args(), { env })));
    batch.forEach((row, index) => results.set(row, done[index]!));
  }
}, 120_000);

describe.each([...new Set(rows.map((row) => row.command))])('asset-webhooks %s', (command) => {
  it.each(rows.filter((row) => row.command === command))('$what: exit $code', (row) => {
    const result = results.get(row)!;
    expect(result.code, result.stderr).toBe(row.code);
    if (row.code === 0) {
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(row.line);
      return;
    }
    // One line, the one expected: no stack trace, no help after it.
    expect(result.stderr).toBe(`${String(row.line)}\n`);
  });
});
