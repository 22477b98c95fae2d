import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliPath } from '../helpers/cli.js';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
  engines: { node: string };
};

function spawnNode(
  node: string,
  args: readonly string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A node whose major version is 20, from the system paths and every `node` on PATH (npm puts its own, a supported one, first). */
function findNode20(): string | undefined {
  const onPath = (process.env.PATH ?? '').split(path.delimiter).map((directory) => path.join(directory, 'node'));
  const candidates = [process.env.ASSET_WEBHOOKS_TEST_NODE_20, '/usr/bin/node', '/usr/local/bin/node', ...onPath];
  for (const candidate of new Set(candidates)) {
    if (candidate === undefined || !existsSync(candidate)) continue;
    try {
      const version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
      if (version.startsWith('v20.')) return candidate;
    } catch {
      // Not an executable Node: the next candidate.
    }
  }
  return undefined;
}

/** A `--import` module that makes this (supported) Node report another version to the entry point. */
function pretendVersion(version: string): string {
  const code = `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '${version}' } });`;
  return `data:text/javascript,${encodeURIComponent(code)}`;
}

describe('the Node.js version check', () => {
  it('refuses Node.js 20 in one line naming the version found and the versions supported, before anything loads', async () => {
    const node20 = findNode20();
    // No Node 20 is a failure, not a skip: this test exists to run the entry point on one.
    expect(
      node20,
      'a Node.js 20 at /usr/bin/node, /usr/local/bin/node, on PATH or at ASSET_WEBHOOKS_TEST_NODE_20',
    ).toBeDefined();
    const version = execFileSync(node20!, ['--version'], { encoding: 'utf8' }).trim().slice(1);
    const { code, stdout, stderr } = await spawnNode(node20!, [cliPath, '--help']);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    const lines = stderr.split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`expected Node.js ${packageJson.engines.node}, got ${version}`);
  });

  it.each([
    ['22.18.0', false],
    ['23.11.0', false],
    ['25.0.0', false],
    ['22.19.0', true],
    ['24.0.0', true],
  ])("keeps to package.json's engines: Node.js %s is accepted: %s", async (version, accepted) => {
    const { code, stdout, stderr } = await spawnNode(process.execPath, [
      '--import',
      pretendVersion(version),
      cliPath,
      '--version',
    ]);
    if (accepted) {
      expect({ code, stdout, stderr }).toEqual({ code: 0, stdout: `${packageJson.version}\n`, stderr: '' });
    } else {
      expect(code).toBe(1);
      expect(stdout).toBe('');
      expect(stderr).toMatch(
        new RegExp(`^asset-webhooks: expected Node\\.js .*, got ${version.replace(/\./g, '\\.')} [^\\n]*\\n$`),
      );
      expect(stderr).toContain(packageJson.engines.node);
    }
  });
});

describe('--version', () => {
  it("prints the package's version and exits 0", async () => {
    expect(await spawnNode(process.execPath, [cliPath, '--version'])).toEqual({
      code: 0,
      stdout: `${packageJson.version}\n`,
      stderr: '',
    });
  });
});
