import path from 'node:path';
import { readRegularFile, UnreadableFileError } from '../files/read-regular-file.js';
import { SecretResolutionError, type SecretProvider } from './types.js';

/** The largest secret file read: a key or a few signing keys are far smaller. */
export const MAX_SECRET_FILE_BYTES = 65_536;

/**
 * Reads `<directory>/<NAME>` (a mounted Kubernetes or Docker secret), with one
 * trailing newline (`\n` or `\r\n`) removed. A NAME is a file name: one with a
 * path separator, `.` or `..` could leave the directory and is refused. Only a
 * regular file of at most MAX_SECRET_FILE_BYTES is read (readRegularFile): a
 * FIFO or a device in the directory would otherwise hold a thread of the pool
 * DNS lookups share, or memory without bound, at every attempt.
 */
export function fileProvider(directory: string): SecretProvider {
  return {
    name: 'file',
    async read(secretName) {
      if (!isSecretFileName(secretName)) {
        throw new SecretResolutionError(secretName, 'file', SECRET_FILE_NAME_EXPECTED);
      }
      const file = path.join(directory, secretName);
      let text: string;
      try {
        text = (await readRegularFile(file, MAX_SECRET_FILE_BYTES)).toString('utf8');
      } catch (error) {
        if (error instanceof UnreadableFileError) {
          throw new SecretResolutionError(
            secretName,
            'file',
            `expected a regular file ${file} of at most ${MAX_SECRET_FILE_BYTES} bytes, got ${error.message}`,
            { cause: error },
          );
        }
        const code =
          error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : 'an error';
        throw new SecretResolutionError(secretName, 'file', `expected a readable file ${file}, got ${code}`, {
          cause: error,
        });
      }
      return text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text;
    },
  };
}

/** What a secret's name must be for provider file (also checked when the configuration is read). */
export const SECRET_FILE_NAME_EXPECTED = 'expected a file name without path separators, NUL, "." or ".."';

export function isSecretFileName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\0]/.test(name);
}
