import { Webhook } from 'standardwebhooks';
import type { SecretResolver } from '../../secrets/types.js';

/**
 * Standard Webhooks signing of a delivery (webhook key `signing.secret`).
 *
 * - `webhook-id` is a pure function of the payload: `msg_`, the installation's
 *   random id (asset_webhooks.installation), `_` and the payload id. Every
 *   attempt and every redelivery of one payload carries the same id, a
 *   redelivery moved to another webhook (`--to`) included: it is the same
 *   payload, and the receiver it now goes to has not seen it under that id.
 *   Payload ids start again in every database; the installation id keeps two
 *   installations, or a database rebuilt from scratch, from ever sending the
 *   same webhook-id for different payloads.
 * - `webhook-timestamp` is the Unix time in seconds when the attempt is sent:
 *   each attempt signs again, so a retry hours later is not refused as old.
 * - `webhook-signature` holds one `v1,<base64>` per key of the secret value,
 *   space-separated, so that during a rotation a receiver holding either the
 *   old or the new key verifies the request.
 * - What is signed is `id.timestamp.body` with the body exactly as sent.
 * The HMAC is the `standardwebhooks` library's own, the same code receivers
 * verify with.
 */

/** The headers signing sets; configured `headers` may not name them. */
export const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/** The `webhook-id` of a payload of an installation: the same for every attempt and redelivery of it. */
export function webhookMessageId(installationId: string, payloadId: number | string): string {
  return `msg_${installationId}_${payloadId}`;
}

const KEY_PREFIX = 'whsec_';
/** The Standard Webhooks minimum length of a key, in bytes once decoded from base64. */
export const MIN_SIGNING_KEY_BYTES = 24;
/** Standard base64 (the form `whsec_` keys are written in), padding optional. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * A signing secret value that is not one or more `whsec_` keys. The message
 * names the secret and which key is wrong, never any part of the value.
 */
export class SigningKeyError extends Error {
  readonly code = 'secret_unavailable';

  constructor(
    readonly secretName: string,
    reason: string,
  ) {
    super(`signing secret ${JSON.stringify(secretName)}: ${reason}`);
    this.name = 'SigningKeyError';
  }
}

/**
 * The keys of a signing secret value: one or more `whsec_<base64>` keys
 * separated by spaces (several during a rotation; each signs).
 *
 * @throws SigningKeyError when a key lacks the prefix, is not base64, or is shorter than MIN_SIGNING_KEY_BYTES.
 */
export function signingKeys(secretName: string, value: string): Webhook[] {
  const keys = value.split(' ').filter((key) => key !== '');
  if (keys.length === 0)
    throw new SigningKeyError(secretName, 'expected one or more whsec_ keys separated by spaces, got none');
  return keys.map((key, index) => {
    const where = `key ${index + 1} of ${keys.length}`;
    if (!key.startsWith(KEY_PREFIX)) throw new SigningKeyError(secretName, `expected ${where} to start with whsec_`);
    const encoded = key.slice(KEY_PREFIX.length);
    if (!BASE64.test(encoded) || encoded.length % 4 === 1) {
      throw new SigningKeyError(secretName, `expected ${where} to be whsec_ followed by base64`);
    }
    // Said without the key's length or any of its bytes: only that it is too short.
    if (Buffer.from(encoded, 'base64').length < MIN_SIGNING_KEY_BYTES) {
      throw new SigningKeyError(
        secretName,
        `expected ${where} to be at least ${MIN_SIGNING_KEY_BYTES} bytes once decoded (the Standard Webhooks minimum), got a shorter key`,
      );
    }
    try {
      return new Webhook(key);
    } catch {
      // The library's own message may quote the key: say what was expected instead.
      throw new SigningKeyError(secretName, `expected ${where} to be whsec_ followed by non-empty base64`);
    }
  });
}

/** The three Standard Webhooks headers of one attempt, signed with every key. */
export function signatureHeaders(
  keys: readonly Webhook[],
  messageId: string,
  sentAt: Date,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
    'webhook-signature': keys.map((key) => key.sign(messageId, sentAt, body)).join(' '),
  };
}

/**
 * The signature headers of one attempt of a payload (`messageId`: see
 * webhookMessageId): resolves the secret
 * named `secretName`, reads its keys and signs `body` with each, at the wall
 * clock's time (not an injected clock: receivers compare the timestamp with
 * theirs).
 *
 * A malformed value is forgotten by the resolver at once, so the next attempt
 * reads the corrected secret rather than the cached bad one.
 *
 * @throws SecretResolutionError or SigningKeyError; neither message holds the value.
 */
export async function signedHeaders(
  secrets: SecretResolver,
  secretName: string,
  messageId: string,
  body: string,
): Promise<Record<string, string>> {
  const value = await secrets.resolve(secretName);
  let keys: Webhook[];
  try {
    keys = signingKeys(secretName, value);
  } catch (error) {
    secrets.invalidate(secretName);
    throw error;
  }
  return signatureHeaders(keys, messageId, new Date(), body);
}
