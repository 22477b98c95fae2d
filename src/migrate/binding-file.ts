import { describeError } from '../db/connect.js';
import { UserError } from '../errors.js';
import { readRegularFile, UnreadableFileError } from '../files/read-regular-file.js';
import { quotedPrefix } from '../text/printable.js';
import { secretLikeness } from '../text/secret-like.js';
import { referenceBindingPath } from './sql-files.js';

/** The largest binding file read: triggers and a view for an asset schema, far below it. */
export const MAX_BINDING_BYTES = 4 * 1024 * 1024;

/**
 * The SQL of `migrate --binding`: the reference binding, or the file at the
 * path given. Only a regular file (through symbolic links) of at most
 * MAX_BINDING_BYTES is read (readRegularFile): a device (`/dev/zero` never
 * ends), a FIFO (a read waits for a writer forever), a directory or a huge
 * file is refused without being read. A file that looks like a secret
 * (secretLikeness: a key file given by mistake) is refused before it runs,
 * since PostgreSQL's syntax error would quote it. Every refusal is a
 * UserError `binding_unreadable` naming the path, what was found and what
 * was expected, and quotes nothing of the file.
 */
export async function readBindingFile(binding: string): Promise<{ name: string; sql: string }> {
  const file = binding === 'reference' ? referenceBindingPath : binding;
  const named = `--binding ${quotedPrefix(binding, 200)}`;
  let bytes: Buffer;
  try {
    bytes = await readRegularFile(file, MAX_BINDING_BYTES);
  } catch (error) {
    if (error instanceof UnreadableFileError && error.reason === 'too_large') {
      throw new UserError(
        'binding_unreadable',
        `${named}: expected a binding SQL file of at most ${MAX_BINDING_BYTES} bytes (4 MiB), got ${error.found}, which is not read`,
        { cause: error },
      );
    }
    if (error instanceof UnreadableFileError) {
      throw new UserError(
        'binding_unreadable',
        `${named}: expected "reference" or a regular SQL file (the path may be a symbolic link to one), got ${error.found}, which is not read`,
        { cause: error },
      );
    }
    throw new UserError(
      'binding_unreadable',
      `--binding: expected "reference" or a readable SQL file, got ${quotedPrefix(binding, 200)} (${describeError(error)})`,
      { cause: error },
    );
  }
  const sql = bytes.toString('utf8');
  const secret = secretLikeness(sql);
  if (secret !== undefined) {
    throw new UserError(
      'binding_unreadable',
      `${named}: expected a binding SQL file, got what looks like a secret, ${secret}; nothing of it is shown, and it was not run`,
    );
  }
  return { name: binding, sql };
}
