// npm runs `prepare` after `npm ci` or `npm install` in a clone, and before
// `npm pack`: it builds dist/ with tsc, a devDependency. A production install in
// a clone (`npm ci --omit=dev`) keeps the dist/ that was built before, and
// without one it fails, saying how to get one. Installing the packed tarball
// never runs this script (npm runs `prepare` only for the root project and git
// dependencies) and needs no compiler: dist/ is inside.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

// npm tells a script of a production install by npm_config_omit. The compiler
// is installed under the alias typescript-compiler, so that no production
// dependency's optional peer `typescript` (cosmiconfig's) keeps it in such an
// install.
const production = (process.env.npm_config_omit ?? '').split(/\s+/).includes('dev');
let typescript = true;
try {
  import.meta.resolve('typescript-compiler');
} catch {
  typescript = false;
}
if (production || !typescript) {
  if (existsSync(new URL('../dist/cli/main.js', import.meta.url))) {
    console.error('prepare: a production install (--omit=dev): using the dist/ already built');
    process.exit(0);
  }
  console.error(
    'prepare: dist/ is missing and this is a production install (--omit=dev), without TypeScript: run `npm ci && npm run build` first, or install the tarball of `npm pack`, which holds dist/',
  );
  process.exit(1);
}
const build = spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(build.status ?? 1);
