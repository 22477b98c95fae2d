import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { spanContextOf } from '../../src/tracing/trace-context.js';
import { tracingWanted } from '../../src/tracing/tracing.js';

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

describe('tracingWanted reads the standard variables', () => {
  it.each([
    [{}, 'off'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, 'off'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 'otlp'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, 'otlp'],
    [{ OTEL_TRACES_EXPORTER: 'otlp' }, 'otlp'],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 'off'],
    [{ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 'off'],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, { unsupported: 'zipkin' }],
  ] as const)('%j gives %j', (env, expected) => {
    expect(tracingWanted(env)).toEqual(expected);
  });
});

describe('spanContextOf reads only what the capture stores', () => {
  it.each([
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', true],
    ['00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01', false],
    ['ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', false],
    ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', false],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', false],
    ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra', false],
  ])('%s: %s', (value, valid) => {
    expect(spanContextOf(value) !== null).toBe(valid);
  });
});

/** Which @opentelemetry packages a fresh Node process resolves while it runs `script` against dist/. */
async function packagesResolved(script: string): Promise<string[]> {
  const program = `
    import { registerHooks } from 'node:module';
    const seen = new Set();
    registerHooks({ resolve(specifier, context, next) {
      if (specifier.startsWith('@opentelemetry/')) seen.add(specifier);
      return next(specifier, context);
    } });
    const dist = ${JSON.stringify(DIST)};
    ${script}
    console.log(JSON.stringify([...seen].sort()));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', program], {
    env: { PATH: process.env.PATH },
  });
  return JSON.parse(stdout.trim().split('\n').pop()!) as string[];
}

describe('the SDK is loaded only when tracing is on', () => {
  it('loads only @opentelemetry/api with the variables unset, through delivery and coalescing too', async () => {
    const resolved = await packagesResolved(`
      await import(dist + 'delivery/deliver.js');
      await import(dist + 'coalesce/run.js');
      const { startTracing } = await import(dist + 'tracing/tracing.js');
      if ((await startTracing({})) !== null) throw new Error('tracing started');`);
    expect(resolved).toEqual(['@opentelemetry/api']);
  });

  it('loads the SDK and the OTLP exporter when an endpoint is set, and shuts them down', async () => {
    const resolved = await packagesResolved(`
      const { startTracing } = await import(dist + 'tracing/tracing.js');
      const tracing = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
      await tracing.shutdown();`);
    expect(resolved).toEqual(
      expect.arrayContaining([
        '@opentelemetry/api',
        '@opentelemetry/sdk-trace',
        '@opentelemetry/exporter-trace-otlp-http',
        '@opentelemetry/resources',
      ]),
    );
  });
});
