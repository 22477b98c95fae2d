import { execFileSync } from 'node:child_process';
import { truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { receiverConfig } from '../helpers/config.js';
import { runCli, startCli } from '../helpers/cli.js';
import { eventually } from '../helpers/receiver.js';
import { untilRunning } from '../helpers/run-process.js';
import { useCleanup } from '../helpers/cleanup.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

// A secret file given by mistake as the configuration document or as a
// binding: the real command line (child processes) must never print it.

const db = useTestDatabase();
const tempDirectory = useTempDirectories();
const cleanup = useCleanup();
const directory = tempDirectory('aw-secret-files-');

/** Secret files as they are written, and the part of each that is secret (after a well-known prefix). */
const SECRETS = [
  {
    name: 'an API token',
    text: 'ghp_R8sK2mQ9vX4tY7wZ1aB3cD5eF6gH8jK0lM2nP4\n',
    secret: 'R8sK2mQ9vX4tY7wZ1aB3cD5eF6gH8jK0lM2nP4',
  },
  {
    name: 'a whsec_ signing key',
    text: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5TnBRSQrZ6g=\n',
    secret: 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5TnBRSQrZ6g=',
  },
  {
    name: 'a PEM private key',
    text: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n',
    secret: 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7',
  },
] as const;

/** Whether `output` holds any six consecutive characters of `secret`. */
function leaks(output: string, secret: string): boolean {
  for (let start = 0; start + 6 <= secret.length; start += 1) {
    if (output.includes(secret.slice(start, start + 6))) return true;
  }
  return false;
}

function write(name: string, text: string): string {
  const file = path.join(directory, name);
  writeFileSync(file, text);
  return file;
}

describe('a secret file given as the configuration document', () => {
  it.each(SECRETS)('check-config shows nothing of $name', async ({ name, text, secret }) => {
    const file = write(`${name.replace(/\W+/g, '-')}.yaml`, text);
    const { code, stdout, stderr } = await runCli(['check-config', file]);
    expect(code).toBe(1);
    expect(stderr).toContain('got what looks like a secret');
    expect(leaks(stdout + stderr, secret)).toBe(false);
  });

  it('check-config shows nothing of a password that is the whole file, and only what it is', async () => {
    const file = write('password.txt', 'hunter2\n');
    const { code, stderr } = await runCli(['check-config', file]);
    expect(code).toBe(1);
    expect(stderr).toBe(
      `${file}: expected a mapping with the root key "assetUpdater", got a text of 7 characters (not shown)\n`,
    );
  });

  it('check-config quotes at most a short excerpt of a 120 KB line', async () => {
    const file = write('long.yaml', `assetUpdater:\n  intervalSeconds: "${'spaced words '.repeat(10_000)}"\n`);
    const { code, stderr } = await runCli(['check-config', file]);
    expect(code).toBe(1);
    expect(stderr.length).toBeLessThan(400);
  });

  it('run --watch-config logs nothing of a token written over its document', async () => {
    const file = write('watched.yaml', receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }]));
    const run = startCli(['run', '--watch-config', '--database-url', db.url, '--config', file], {
      env: { LOG_LEVEL: 'info' },
    });
    cleanup.process(run);
    await untilRunning(run);
    writeFileSync(file, SECRETS[0].text);
    await eventually(
      async () => (run.output.stderr.includes('invalid configuration: keeping the one in use') ? true : undefined),
      { timeoutMs: 20_000, what: 'the refused reload' },
    );
    expect(run.output.stderr).toContain('got what looks like a secret');
    expect(leaks(run.output.stderr + run.output.stdout, SECRETS[0].secret)).toBe(false);
  });
});

describe('migrate --binding', () => {
  it.each(SECRETS)('refuses $name before running it, showing nothing of it', async ({ name, text, secret }) => {
    const file = write(`${name.replace(/\W+/g, '-')}.sql`, text);
    const { code, stdout, stderr } = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
    expect(code).toBe(1);
    expect(stderr).toContain('got what looks like a secret');
    expect(stderr).toContain('it was not run');
    expect(leaks(stdout + stderr, secret)).toBe(false);
  });

  it('quotes only a short excerpt of a binding that fails as SQL', async () => {
    // An unterminated string: PostgreSQL's error quotes the file from there to its end.
    const tail = 'internal note: the staging password is Tr0ub4dor-and-3 and it rotates monthly';
    const file = write('unterminated.sql', `select 1;\nselect 'this string never ends\n${tail}\n`);
    const { code, stdout, stderr } = await runCli(['migrate', '--database-url', db.url, '--binding', file]);
    expect(code).toBe(1);
    expect(stderr).toContain('nothing of the binding was installed');
    expect(stderr).toContain('...');
    expect(stdout + stderr).not.toContain('Tr0ub4dor');
  });

  it.each([
    ['/dev/zero', () => '/dev/zero', 'a character device'],
    [
      'a FIFO',
      () => {
        const fifo = path.join(directory, 'binding.fifo');
        execFileSync('mkfifo', [fifo]);
        return fifo;
      },
      'a FIFO (named pipe)',
    ],
    ['a directory', () => directory, 'a directory'],
    [
      'a sparse file of 1.5 GB',
      () => {
        const file = write('huge.sql', '');
        truncateSync(file, 1.5 * 1024 ** 3);
        return file;
      },
      '1610612736 bytes',
    ],
  ])('refuses %s at once, without reading it, naming the path and what it found', async (_, make, found) => {
    const file = make();
    const started = Date.now();
    const { code, stderr } = await runCli(['migrate', '--database-url', db.url, '--binding', file], {
      timeoutMs: 20_000,
    });
    expect(code).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(stderr.split('\n').filter((line) => line !== '')).toEqual([expect.stringContaining(`--binding "${file}"`)]);
    expect(stderr).toContain(`got ${found}, which is not read`);
  });
});
