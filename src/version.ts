import { readFileSync } from 'node:fs';

let version: string | undefined;

/**
 * The version of this package, from its package.json (one directory above
 * both src/ and dist/, and part of every install). Read once, on first use:
 * `--version` prints it and every delivery names it in its User-Agent.
 */
export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;
  return version;
}
