#!/usr/bin/env node
// `npm run bench [-- --quick] [--json] [--database-url URL] [--only SECTIONS]
// [--repeats N]`. The benchmark is
// TypeScript in bench/src/, compiled by `npm run build:bench` into dist-bench/.
// It imports the service's sources, so tsc compiles a copy of them into
// dist-bench/src/ too. That copy is never run: every import of it is resolved
// to the service's own build in dist/ instead, so the bench measures the code
// `run` executes, and the service's paths relative to dist/ (its SQL files,
// the embedded server's script) hold. `npm run bench` builds both.
import { register } from 'node:module';

const copy = new URL('../dist-bench/src/', import.meta.url).href;
const service = new URL('../dist/', import.meta.url).href;
const hooks = `
export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  return resolved.url.startsWith(${JSON.stringify(copy)})
    ? { ...resolved, url: ${JSON.stringify(service)} + resolved.url.slice(${copy.length}) }
    : resolved;
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);

// Imported after the hook is registered: a static import would be resolved first.
const { benchMain } = await import('../dist-bench/bench/src/main.js');
await benchMain(process.argv);
