#!/usr/bin/env node
// The command line entry point. The TypeScript sources are compiled to dist/ by
// `npm ci` (the `prepare` script) and by `npm run build`.
import { bufferEarlySignals, commandNameOf } from '../dist/cli/early-signals.js';

// `run` must not die of a signal that arrives while the modules below load.
if (commandNameOf(process.argv) === 'run') bufferEarlySignals();
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv);
