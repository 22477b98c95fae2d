import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../../src/config/load.js';
import type { Config } from '../../../src/config/schema.js';
import { UserError } from '../../../src/errors.js';
import { useTempDirectories } from '../../helpers/temp-directories.js';

/**
 * The table tests of test/config/schema/, one file per file of
 * src/config/schema/: each row is a fragment of a document and the exact
 * problem line the real loader (loadConfigFile, what every command that reads
 * a document calls) gives for it, or the value it reads.
 */

/** A valid webhook; a row's fragment is laid over it. */
export const BASE_WEBHOOK = { id: 'crm', url: 'https://receiver.example/a', enabled: true } as const;

export type { Config };

export interface Fragment {
  /** Keys laid over the document's root, beside `assetUpdater`. */
  readonly root?: Readonly<Record<string, unknown>>;
  /** Keys laid over `assetUpdater` (`webhooks` replaces the one webhook); `undefined` removes a key. */
  readonly settings?: Readonly<Record<string, unknown>>;
  /** Keys laid over the one webhook; `undefined` removes a key. */
  readonly webhook?: Readonly<Record<string, unknown>>;
}

/** The keys of `object` whose value is not undefined. */
const defined = (object: Readonly<Record<string, unknown>>) =>
  Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined));

/** The document of one webhook with the fragment laid over it, as YAML. */
export function documentWith({ root = {}, settings = {}, webhook = {} }: Fragment): string {
  return stringify({
    assetUpdater: defined({ webhooks: [defined({ ...BASE_WEBHOOK, ...webhook })], ...settings }),
    ...root,
  });
}

export interface Loader {
  /** The problem lines the loader refuses the text with; [] when it is valid. */
  problems(text: string): Promise<readonly string[]>;
  /** The document as the loader reads it; throws when it is refused. */
  load(text: string): Promise<Config>;
}

/** Call at the top of a test file: writes each document to a file of its own and loads it. */
export function useLoader(): Loader {
  const tempDirectory = useTempDirectories();
  let directory: string | undefined;
  let count = 0;
  const load = async (text: string): Promise<Config> => {
    directory ??= tempDirectory('aw-schema-table-');
    count += 1;
    const file = path.join(directory, `config-${count}.yaml`);
    writeFileSync(file, text);
    return loadConfigFile(file);
  };
  return {
    load,
    async problems(text) {
      try {
        await load(text);
        return [];
      } catch (error) {
        if (error instanceof UserError && error.code === 'config_invalid') return error.problems;
        throw error;
      }
    },
  };
}

/** A refused row: what it shows, the fragment, and the one problem line expected, exactly. */
export type Refused = readonly [name: string, fragment: Fragment, problem: string];
/** An accepted row: what it shows, the fragment, what to read of the loaded document, and its value. */
export type Read = readonly [name: string, fragment: Fragment, read: (config: Config) => unknown, value: unknown];

/** Call at the top of a test file: `refuses` and `reads` each make one test per row, through the real loader. */
export function useSchemaTable(): { refuses(rows: readonly Refused[]): void; reads(rows: readonly Read[]): void } {
  const loader = useLoader();
  return {
    refuses(rows) {
      it.each(rows)('refuses %s', async (_name, fragment, problem) => {
        expect(await loader.problems(documentWith(fragment))).toEqual([problem]);
      });
    },
    reads(rows) {
      it.each(rows)('reads %s', async (_name, fragment, read, value) => {
        expect(read(await loader.load(documentWith(fragment)))).toEqual(value);
      });
    },
  };
}
