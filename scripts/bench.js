#!/usr/bin/env node
// `npm run bench [-- --quick] [--json] [--database-url URL]`. The benchmark is
// TypeScript in src/bench/, compiled with the rest by `npm run build`.
import { benchMain } from '../dist/bench/main.js';

await benchMain(process.argv);
