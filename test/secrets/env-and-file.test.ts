import { execFileSync } from 'node:child_process';
import { symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { envVariableName } from '../../src/secrets/env-provider.js';
import { createSecretResolver } from '../../src/secrets/resolver.js';
import { SecretResolutionError } from '../../src/secrets/types.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();

describe('env provider', () => {
  it.each([
    ['crm-api-key', 'ASSET_WEBHOOKS_SECRET_CRM_API_KEY'],
    ['shop.key/2', 'ASSET_WEBHOOKS_SECRET_SHOP_KEY_2'],
    ['Already_UPPER9', 'ASSET_WEBHOOKS_SECRET_ALREADY_UPPER9'],
    ['ümlaut key', 'ASSET_WEBHOOKS_SECRET__MLAUT_KEY'],
  ])('%s is read from %s', async (name, variable) => {
    expect(envVariableName(name)).toBe(variable);
    const resolver = createSecretResolver(
      { provider: 'env', cacheSeconds: 300 },
      { env: { [variable]: 'value-of-it' } },
    );
    expect(await resolver.resolve(name)).toBe('value-of-it');
  });

  it('an unset variable fails with a SecretResolutionError naming the variable', async () => {
    const resolver = createSecretResolver({ provider: 'env', cacheSeconds: 300 }, { env: {} });
    const error = await resolver.resolve('crm-api-key').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(SecretResolutionError);
    expect(error).toMatchObject({
      secretName: 'crm-api-key',
      provider: 'env',
      message:
        'secret "crm-api-key" (provider env): expected the environment variable ASSET_WEBHOOKS_SECRET_CRM_API_KEY to be set, got nothing',
    });
  });

  it('an empty variable is refused as an empty value', async () => {
    const resolver = createSecretResolver(
      { provider: 'env', cacheSeconds: 300 },
      { env: { ASSET_WEBHOOKS_SECRET_K: '' } },
    );
    await expect(resolver.resolve('k')).rejects.toThrow(
      'secret "k" (provider env): expected a value, got an empty one',
    );
  });
});

describe('file provider', () => {
  const directory = tempDirectory('aw-secrets-');
  writeFileSync(path.join(directory, 'crm-api-key'), 'file-secret\n');
  writeFileSync(path.join(directory, 'no-newline'), 'plain');
  writeFileSync(path.join(directory, 'crlf'), 'windows\r\n');
  writeFileSync(path.join(directory, 'inner-spaces'), 'a b  c\n');
  writeFileSync(path.join(directory, 'two-newlines'), 'two\n\n');
  writeFileSync(path.join(directory, 'empty'), '');
  const resolver = createSecretResolver({ provider: 'file', cacheSeconds: 300, directory });

  it.each([
    ['crm-api-key', 'file-secret'],
    ['no-newline', 'plain'],
    ['crlf', 'windows'],
    ['inner-spaces', 'a b  c'],
  ])('reads <directory>/%s with one trailing newline removed', async (name, value) => {
    expect(await resolver.resolve(name)).toBe(value);
  });

  it('removes only one trailing newline: the second is a control character and refused', async () => {
    await expect(resolver.resolve('two-newlines')).rejects.toThrow(
      'secret "two-newlines" (provider file): expected a value usable as an HTTP header, got one with a control character in it (usually a line break: a second trailing newline, or the CR of a file written with Windows line endings)',
    );
  });

  it('an empty file is refused', async () => {
    await expect(resolver.resolve('empty')).rejects.toThrow(/expected a value, got an empty one/);
  });

  it.for([
    ['a FIFO', (file: string) => execFileSync('mkfifo', [file]), 'a FIFO (named pipe)'],
    ['a symbolic link to /dev/zero', (file: string) => symlinkSync('/dev/zero', file), 'a character device'],
    [
      'a sparse file of 1 GB',
      (file: string) => (writeFileSync(file, ''), truncateSync(file, 1024 ** 3)),
      'a file of 1073741824 bytes',
    ],
  ] as const)('refuses %s without reading it (no wait, no memory)', async ([, make, found]) => {
    const name = `odd-${found.split(' ')[1]}`;
    const file = path.join(directory, name);
    make(file);
    await expect(resolver.resolve(name)).rejects.toThrow(
      `secret "${name}" (provider file): expected a regular file ${file} of at most 65536 bytes, got ${found}`,
    );
  });

  it('a missing file names the path and the error code', async () => {
    await expect(resolver.resolve('missing')).rejects.toThrow(
      `secret "missing" (provider file): expected a readable file ${path.join(directory, 'missing')}, got ENOENT`,
    );
  });

  it.each(['../etc/passwd', 'sub/key', 'sub\\key', '..', '.', '', 'nul\0byte'])(
    'refuses the name %j, which could leave the directory',
    async (name) => {
      await expect(resolver.resolve(name)).rejects.toThrow(/expected a file name without path separators/);
    },
  );
});
