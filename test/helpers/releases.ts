import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root: the package whose tests run. */
export const checkoutRoot = fileURLToPath(new URL('../../', import.meta.url));

/** A release of asset-webhooks as CHANGELOG.md names it: `## X.Y.Z - DATE`. */
export interface Release {
  readonly version: string;
  /** The commit it was released from: the tag vX.Y.Z, or the commit that added its heading. */
  readonly commit: string;
  /** How the commit was found, for the test's log. */
  readonly foundBy: string;
}

const HEADING = /^## (\d+\.\d+\.\d+) - (\d{4}-\d{2}-\d{2})\s*$/m;

function git(root: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/**
 * The newest release in the checkout's CHANGELOG.md (its first `## X.Y.Z -
 * DATE` heading), at the commit of its tag vX.Y.Z when the repository has
 * one, or else at the commit that added the heading. Null before the first
 * release: the changelog has no such heading yet.
 */
export function previousRelease(root: string = checkoutRoot): Release | null {
  const changelog = readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8');
  const heading = HEADING.exec(changelog);
  if (!heading) return null;
  const version = heading[1]!;
  const tagged = spawnSync('git', ['rev-parse', '--verify', '--quiet', `refs/tags/v${version}^{commit}`], {
    cwd: root,
    encoding: 'utf8',
  });
  if (tagged.status === 0) return { version, commit: tagged.stdout.trim(), foundBy: `tag v${version}` };
  // -S lists the commits that changed the number of occurrences: the oldest added the heading.
  const commits = git(root, 'log', '--format=%H', `-S## ${version} - `, '--', 'CHANGELOG.md')
    .split('\n')
    .filter(Boolean);
  const commit = commits.at(-1);
  if (commit === undefined) {
    throw new Error(
      `CHANGELOG.md names release ${version}, but no tag v${version} exists and git log finds no commit that added its heading (a shallow clone? fetch the history)`,
    );
  }
  return { version, commit, foundBy: `the commit that added "## ${version} - " to CHANGELOG.md` };
}

/** A package of asset-webhooks on disk, ready to run: its CLI at bin/asset-webhooks.js. */
export interface InstalledPackage {
  readonly root: string;
  readonly cli: string;
}

function run(command: string, args: string[], cwd: string): void {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} in ${cwd} ended with ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`,
    );
  }
}

/**
 * The files of `commit` in `directory` (git archive: no worktree to clean up
 * after), installed and built. Its dependencies are the checkout's
 * node_modules, linked, when its package-lock.json is the checkout's;
 * otherwise `npm ci` installs its own.
 */
export function installCommit(commit: string, directory: string): InstalledPackage {
  mkdirSync(directory, { recursive: true });
  const archive = spawnSync('git', ['archive', '--format=tar', commit], { cwd: checkoutRoot, maxBuffer: 1 << 30 });
  if (archive.status !== 0) throw new Error(`git archive ${commit}: ${archive.stderr.toString()}`);
  const tar = spawnSync('tar', ['-x', '-C', directory], { input: archive.stdout });
  if (tar.status !== 0) throw new Error(`tar -x into ${directory}: ${tar.stderr.toString()}`);
  const lock = (root: string): string => readFileSync(path.join(root, 'package-lock.json'), 'utf8');
  if (lock(directory) === lock(checkoutRoot)) {
    symlinkSync(path.join(checkoutRoot, 'node_modules'), path.join(directory, 'node_modules'), 'dir');
  } else {
    run('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], directory);
  }
  run('npm', ['run', 'build', '--silent'], directory);
  return { root: directory, cli: path.join(directory, 'bin', 'asset-webhooks.js') };
}

/**
 * A "next release" of the checkout in `directory`: its built dist/, bin/,
 * sql/ and package.json copied, node_modules linked, and `extraMigrations`
 * (file name to SQL) added to sql/migrations.
 */
export function nextRelease(directory: string, extraMigrations: Readonly<Record<string, string>>): InstalledPackage {
  if (!existsSync(path.join(checkoutRoot, 'dist'))) throw new Error('the checkout is not built: npm run build');
  mkdirSync(directory, { recursive: true });
  for (const entry of ['dist', 'bin', 'sql', 'schema', 'package.json'])
    cpSync(path.join(checkoutRoot, entry), path.join(directory, entry), { recursive: true });
  symlinkSync(path.join(checkoutRoot, 'node_modules'), path.join(directory, 'node_modules'), 'dir');
  for (const [name, sql] of Object.entries(extraMigrations))
    writeFileSync(path.join(directory, 'sql', 'migrations', name), sql);
  return { root: directory, cli: path.join(directory, 'bin', 'asset-webhooks.js') };
}
