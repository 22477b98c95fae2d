import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { limitHeapGrowth } from '../../src/service/heap-growth.js';
import { startCli } from '../helpers/cli.js';
import { eventually } from '../helpers/receiver.js';
import { useTempDirectories } from '../helpers/temp-directories.js';
import { useTestDatabase } from '../helpers/test-database.js';

const tempDirectory = useTempDirectories();
const db = useTestDatabase();
const heapGrowth = fileURLToPath(new URL('../../dist/service/heap-growth.js', import.meta.url));

/**
 * A child process that keeps about 25 MB alive and replaces it over and over,
 * as a draining `run` does, and prints the largest its old generation got.
 * `limit` calls limitHeapGrowth first, as `run` does at start-up.
 */
async function peakOldSpaceMb(limit: boolean): Promise<number> {
  const script = `
    import v8 from 'node:v8';
    import { limitHeapGrowth } from ${JSON.stringify(heapGrowth)};
    if (${limit}) limitHeapGrowth();
    const live = Array.from({ length: 200000 }, (_, i) => 'x'.repeat(100) + i);
    let peak = 0;
    for (let round = 0; round < 3000; round += 1) {
      for (let i = 0; i < 2000; i += 1) live[(round * 2000 + i) % live.length] = { a: 'y'.repeat(80) + i, b: [round, i] };
      peak = Math.max(peak, v8.getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_size);
    }
    console.log(Math.round(peak / 1048576));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
  return Number(stdout.trim());
}

describe('the heap growth limit of run', () => {
  it(
    'is set after start-up and V8 keeps to it: the old generation stays well below what V8 grows it to on its own',
    { timeout: 60_000 },
    async () => {
      const [own, limited] = await Promise.all([peakOldSpaceMb(false), peakOldSpaceMb(true)]);
      // Limited, the old generation grows by a smaller factor at each collection;
      // the margin is wide enough for the differences between Node versions.
      expect(limited).toBeGreaterThan(0);
      expect(limited).toBeLessThan(own * 0.8);
    },
  );

  it('gives way to a --heap-growing-percent given to Node, in either spelling', () => {
    expect(limitHeapGrowth(150, ['--heap-growing-percent=0'])).toBeNull();
    expect(limitHeapGrowth(150, ['--inspect', '--heap_growing_percent=300'])).toBeNull();
  });

  it('run applies it, and says so when it runs, unless Node was given one', { timeout: 60_000 }, async () => {
    const config = path.join(tempDirectory('aw-heap-'), 'config.yaml');
    writeFileSync(config, 'assetUpdater:\n  webhooks: []\n');
    const logLine = async (nodeArgs: string[]): Promise<{ heapGrowingPercent?: number | null; msg: string }> => {
      const service = startCli(['run', '--database-url', db.url, '--config', config], {
        env: { LOG_LEVEL: 'info' },
        nodeArgs,
      });
      try {
        return await eventually(
          async () => {
            const line = service.output.stderr.split('\n').find((text) => text.includes('asset-webhooks running'));
            return line === undefined
              ? undefined
              : (JSON.parse(line) as { heapGrowingPercent?: number | null; msg: string });
          },
          { timeoutMs: 30_000, what: 'the heap growth line' },
        );
      } finally {
        service.child.kill('SIGTERM');
        await service.exited;
      }
    };
    expect(await logLine([])).toMatchObject({ heapGrowingPercent: 150, msg: 'asset-webhooks running' });
    expect(await logLine(['--heap-growing-percent=300'])).toMatchObject({
      heapGrowingPercent: null,
      msg: 'asset-webhooks running',
    });
  });
});
