#!/usr/bin/env node
// The command line entry point. The TypeScript sources are compiled to dist/ by
// `npm ci` (the `prepare` script) and by `npm run build`.
//
// The Node.js version is checked before anything else loads: the modules
// below (undici first) fail on an older Node with a stack trace that names
// neither the version found nor the one needed. So this file imports nothing
// statically, and the range here must stay the one of package.json's
// `engines` (test/cli/node-version.test.ts holds them together).
const SUPPORTED = '^22.19.0 || ^24.0.0';
const [major, minor] = process.versions.node.split('.').map(Number);
if (!((major === 22 && minor >= 19) || major === 24)) {
  process.stderr.write(
    `asset-webhooks: expected Node.js ${SUPPORTED}, got ${process.versions.node} (${process.execPath}); ` +
      'run it with a supported Node.js, such as the one `npm ci` installs (npx asset-webhooks)\n',
  );
  process.exit(1);
}

const { bufferEarlySignals } = await import('../dist/cli/early-signals.js');
// A command that handles signals must not die of, nor lose, one that arrives while the modules below load.
bufferEarlySignals(process.argv);
const { main } = await import('../dist/cli/main.js');

process.exitCode = await main(process.argv);
