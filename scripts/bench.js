#!/usr/bin/env node
// `npm run bench [-- --quick] [--json] [--database-url URL]`. The benchmark is
// TypeScript in bench/src/, compiled by `npm run build:bench` into dist-bench/
// (kept apart from dist/, which holds only the service). Its drain figures run
// the real CLI, which runs dist/: `npm run bench` builds both.
import { benchMain } from '../dist-bench/bench/src/main.js';

await benchMain(process.argv);
