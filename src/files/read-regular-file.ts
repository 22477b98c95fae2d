import { constants, type Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';

/**
 * The path does not lead to something this program reads: not a regular file,
 * or larger than the limit. `found` says what it is ("a FIFO (named pipe)",
 * "1610612736 bytes").
 */
export class UnreadableFileError extends Error {
  constructor(
    readonly reason: 'not_a_regular_file' | 'too_large',
    readonly found: string,
  ) {
    super(reason === 'too_large' ? `a file of ${found}` : found);
    this.name = 'UnreadableFileError';
  }
}

/**
 * The bytes of `file`, read only when it is a regular file (through any
 * symbolic links) of at most `maxBytes`. Anything else is refused without
 * being read: a device (`/dev/zero` never ends), a FIFO (a read waits for a
 * writer forever, holding a thread of libuv's pool, which DNS lookups share),
 * a directory, a huge or sparse file. The file is opened with O_NONBLOCK, so a
 * FIFO put in its place between the check and the open is refused by the
 * second check rather than waited on; and no more than `maxBytes` is read,
 * however the file grows meanwhile.
 *
 * @throws UnreadableFileError, or the file system's error (ENOENT, EACCES, ...).
 */
export async function readRegularFile(file: string, maxBytes: number): Promise<Buffer> {
  assertReadable(await stat(file), maxBytes);
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const opened = await handle.stat();
    assertReadable(opened, maxBytes);
    // Room for the size the file had, and one byte to see that it has grown since.
    let buffer = Buffer.allocUnsafe(opened.size + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        const grown = Buffer.allocUnsafe(maxBytes + 1);
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > maxBytes) throw new UnreadableFileError('too_large', `more than ${maxBytes} bytes`);
    }
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

function assertReadable(stats: Stats, maxBytes: number): void {
  if (!stats.isFile()) throw new UnreadableFileError('not_a_regular_file', fileKind(stats));
  if (stats.size > maxBytes) throw new UnreadableFileError('too_large', `${stats.size} bytes`);
}

function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO (named pipe)';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSocket()) return 'a socket';
  return 'something other than a file';
}
