// npm runs `prepare` after `npm ci` or `npm install` in a clone, and before
// `npm pack`: it builds dist/ with tsc. tsc is a devDependency, so a production
// install in a clone (`npm ci --omit=dev`) has none: it keeps the dist/ that
// was built before, and without one it fails, saying how to get one. Installing
// the packed tarball never runs this script (npm runs `prepare` only for the
// root project and git dependencies) and needs no compiler: dist/ is inside.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

let typescript = true;
try {
  import.meta.resolve('typescript');
} catch {
  typescript = false;
}
if (!typescript) {
  if (existsSync(new URL('../dist/cli/main.js', import.meta.url))) {
    console.error('prepare: TypeScript is not installed (--omit=dev): using the dist/ already built');
    process.exit(0);
  }
  console.error(
    'prepare: dist/ is missing and TypeScript is not installed (--omit=dev): run `npm ci && npm run build` first, or install the tarball of `npm pack`, which holds dist/',
  );
  process.exit(1);
}
const build = spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
process.exit(build.status ?? 1);
