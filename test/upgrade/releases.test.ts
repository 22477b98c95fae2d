import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { previousRelease } from '../helpers/releases.js';

const temp = useTempDirectories();

it('finds the previous release by its changelog heading: none, then the commit that added it, then its tag', () => {
  const root = temp('aw-releases-');
  const git = (...args: string[]): string =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
      cwd: root,
      encoding: 'utf8',
    }).trim();
  const commit = (changelog: string, message: string): string => {
    writeFileSync(path.join(root, 'CHANGELOG.md'), changelog);
    git('add', 'CHANGELOG.md');
    git('commit', '-q', '-m', message);
    return git('rev-parse', 'HEAD');
  };
  git('init', '-q');
  commit('# Changelog\n\n## Unreleased\n\n- a change\n', 'first');
  expect(previousRelease(root)).toBeNull();

  const released = commit('# Changelog\n\n## 0.1.0 - 2026-12-07\n\n- a change\n', 'release 0.1.0');
  commit('# Changelog\n\n## Unreleased\n\n- another\n\n## 0.1.0 - 2026-12-07\n\n- a change\n', 'after');
  expect(previousRelease(root)).toMatchObject({ version: '0.1.0', commit: released });

  const second = commit(
    '# Changelog\n\n## 0.2.0 - 2027-01-11\n\n- another\n\n## 0.1.0 - 2026-12-07\n\n- a change\n',
    'release 0.2.0',
  );
  commit('# Changelog\n\n## Unreleased\n\n## 0.2.0 - 2027-01-11\n\n- another\n\n## 0.1.0 - 2026-12-07\n', 'later');
  expect(previousRelease(root)).toMatchObject({ version: '0.2.0', commit: second });
  // A tag, where the repository keeps them, names the release's commit.
  git('tag', 'v0.2.0', 'HEAD');
  expect(previousRelease(root)).toMatchObject({
    version: '0.2.0',
    commit: git('rev-parse', 'HEAD'),
    foundBy: 'tag v0.2.0',
  });
});
