import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SecretProvider } from './types.js';
import { SecretResolutionError } from './types.js';

/** `<directory>/<NAME>`, one trailing newline removed. Names may not leave the directory. */
export function fileProvider(directory: string): SecretProvider {
  return {
    name: 'file',
    async read(secretName) {
      if (secretName.includes('/') || secretName.includes('\\') || secretName === '.' || secretName === '..') {
        throw new SecretResolutionError(secretName, 'file', 'expected a file name without path separators');
      }
      const file = path.join(directory, secretName);
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (error) {
        const code = (error as { code?: string }).code ?? 'error';
        throw new SecretResolutionError(secretName, 'file', `expected a readable file ${file}, got ${code}`, { cause: error });
      }
      return text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text;
    },
  };
}
