import { mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { watchConfigFile, type ConfigWatcher } from '../../src/config/watch.js';
import { eventually } from '../helpers/receiver.js';
import { useTempDirectories } from '../helpers/temp-directories.js';

const tempDirectory = useTempDirectories();
const INTERVAL_MS = 20;
let watcher: ConfigWatcher | undefined;
/** Polls ended since the start of the file: each logs one line, unchanged (debug), changed or unusable. */
let pollsEnded = 0;
const logger = pino(
  { level: 'debug' },
  {
    write: (line: string) => {
      if (/"msg":"configuration file (unchanged|changed: reloading|unusable: reloading)/.test(line)) pollsEnded += 1;
    },
  },
);

afterEach(() => watcher?.close());

/** Starts a watcher counting changes (its baseline is read before it returns). */
async function watch(
  file: string,
  onChange: () => unknown = () => undefined,
): Promise<{ changes: () => number; polls: () => Promise<void> }> {
  let changes = 0;
  watcher = await watchConfigFile(
    file,
    async () => {
      changes += 1;
      await onChange();
    },
    logger,
    INTERVAL_MS,
  );
  /**
   * Two more polls: the second began after the call, so it read the path as
   * the test left it, and a change would have been seen by then.
   */
  const polls = async (): Promise<void> => {
    const from = pollsEnded;
    await eventually(async () => (pollsEnded >= from + 2 ? true : undefined), {
      timeoutMs: 10_000,
      what: 'two polls of the watcher',
    });
  };
  return { changes: () => changes, polls };
}

async function changesReach(counter: () => number, n: number): Promise<void> {
  await eventually(async () => (counter() >= n ? true : undefined), { timeoutMs: 10_000, what: `${n} changes` });
}

describe('watchConfigFile', () => {
  it('sees a write in place and a rename over the file, and nothing while the bytes stay the same', async () => {
    const directory = tempDirectory('aw-watch-unit-');
    const file = path.join(directory, 'config.yaml');
    writeFileSync(file, 'a: 1\n');
    const { changes, polls } = await watch(file);
    expect(changes()).toBe(0);

    writeFileSync(file, 'a: 2\n');
    await changesReach(changes, 1);

    writeFileSync(path.join(directory, 'next.yaml'), 'a: 3\n');
    renameSync(path.join(directory, 'next.yaml'), file);
    await changesReach(changes, 2);

    // Rewritten with the same bytes: no change.
    writeFileSync(file, 'a: 3\n');
    await polls();
    expect(changes()).toBe(2);
    // Gone, and back unchanged: each is a change, so the reload records that the file is unusable, then usable again.
    unlinkSync(file);
    await changesReach(changes, 3);
    await polls();
    expect(changes()).toBe(3);
    writeFileSync(file, 'a: 3\n');
    await changesReach(changes, 4);
    await polls();
    expect(changes()).toBe(4);
  });

  it('sees the atomic ..data symlink swap of a ConfigMap volume', async () => {
    const directory = tempDirectory('aw-watch-unit-');
    const generation = (name: string, text: string): void => {
      mkdirSync(path.join(directory, name));
      writeFileSync(path.join(directory, name, 'config.yaml'), text);
    };
    generation('..v1', 'a: 1\n');
    symlinkSync('..v1', path.join(directory, '..data'));
    symlinkSync('..data/config.yaml', path.join(directory, 'config.yaml'));
    const { changes, polls } = await watch(path.join(directory, 'config.yaml'));
    // A generation written beside the one in use changes nothing the path reaches.
    generation('..v2', 'a: 2\n');
    await polls();
    expect(changes()).toBe(0);

    symlinkSync('..v2', path.join(directory, '..data_tmp'));
    renameSync(path.join(directory, '..data_tmp'), path.join(directory, '..data'));
    rmSync(path.join(directory, '..v1'), { recursive: true });
    await changesReach(changes, 1);
    // One swap, one reload: removing the old generation is no change of the document.
    await polls();
    expect(changes()).toBe(1);
  });

  it('never overlaps reloads, and reloads again for a change made during one', async () => {
    const file = path.join(tempDirectory('aw-watch-unit-'), 'config.yaml');
    writeFileSync(file, 'a: 1\n');
    let running = 0;
    let overlapped = false;
    let release: (() => void) | undefined;
    const { changes } = await watch(file, async () => {
      running += 1;
      overlapped ||= running > 1;
      await new Promise<void>((resolve) => (release = resolve));
      running -= 1;
    });
    writeFileSync(file, 'a: 2\n');
    await changesReach(changes, 1);
    // Changed while the first reload still runs: seen once that one returns.
    writeFileSync(file, 'a: 3\n');
    // A fixed wait: the watcher by design does nothing while a reload runs, so no event can show it started no second one.
    await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS * 5));
    expect(changes()).toBe(1);
    release!();
    await changesReach(changes, 2);
    release!();
    expect(overlapped).toBe(false);
  });
});
