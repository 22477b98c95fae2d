import type { Dispatcher } from 'undici';
import { storableBytes } from '../../text/storable-text.js';
import { redactExcerpt } from './redact.js';

export type ResponseBody = Dispatcher.ResponseData['body'];

/**
 * Up to max bytes of the body as UTF-8 (a character cut at the limit becomes
 * U+FFFD), with every request header value the receiver echoes replaced (see
 * redactExcerpt). The stream is destroyed afterwards, so the rest is never
 * read and the connection is closed rather than drained. A body that breaks
 * or is cut by the deadline yields what arrived before.
 */
export async function readExcerpt(body: ResponseBody, max: number, secrets: readonly Buffer[]): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Past the limit by the longest secret, so that one starting within the limit is read whole and replaced.
  const read = max > 0 ? max + Math.max(0, ...secrets.map((secret) => secret.length)) : 0;
  try {
    if (read > 0) {
      for await (const chunk of body) {
        chunks.push(chunk.subarray(0, read - size));
        size += Math.min(chunk.length, read - size);
        if (size >= read) break;
      }
    }
  } catch {
    // The status has arrived and decides; what came before the break is the excerpt.
  } finally {
    // We are done with the body whatever state it is in. Destroying a body not
    // yet read to its end emits an abort error: expected, so it is not an
    // uncaught one.
    body.on('error', () => {});
    body.destroy();
  }
  return storableBytes(redactExcerpt(Buffer.concat(chunks), max, secrets));
}
