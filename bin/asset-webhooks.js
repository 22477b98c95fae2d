#!/usr/bin/env node
// The command line entry point. The TypeScript sources are compiled to dist/ by
// `npm ci` (the `prepare` script) and by `npm run build`.
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv);
