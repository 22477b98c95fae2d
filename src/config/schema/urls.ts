import { z } from 'zod';
import { quotedPrefix } from '../../text/printable.js';
import { MAX_URL_LENGTH } from './limits.js';
import { Found, refuseUnstorable, UNSTORABLE } from './primitives.js';

/**
 * A character that WHATWG URL parsing drops or rewrites rather than refuses:
 * tab, CR and LF anywhere, C0 controls and space at the ends, backslash (read
 * as a slash); spaces and other controls inside are percent-encoded silently.
 * A url holding one means something else than what was sent.
 */
export const URL_REWRITTEN_CHARACTER = /[\x00-\x20\x7f\\]/;

/** A scheme followed by exactly two slashes and a host. */
const AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]/;

/**
 * An http or https url, with nothing URL parsing would rewrite and no user or
 * password; `credentials` says where credentials go instead, for the line
 * that refuses a url holding some.
 */
const urlWithout = (credentials: string) =>
  z.string({ error: 'expected an http or https URL' }).superRefine((value, context) => {
    if (value.length > MAX_URL_LENGTH) {
      context.addIssue({
        code: 'custom',
        input: new Found(`a url of ${value.length} characters`),
        message: `expected a url of at most ${MAX_URL_LENGTH} characters`,
      });
      return;
    }
    const rewritten = URL_REWRITTEN_CHARACTER.exec(value);
    if (rewritten) {
      context.addIssue({
        code: 'custom',
        input: new Found(
          `${quotedPrefix(rewritten[0])} at position ${rewritten.index + 1} of ${quotedPrefix(maskedUrl(value))}`,
        ),
        message:
          'expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C)',
      });
      return;
    }
    if (UNSTORABLE.test(value)) {
      refuseUnstorable(value, context);
      return;
    }
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      context.addIssue({ code: 'custom', input: value, message: 'expected an http or https URL' });
      return;
    }
    // `https:/host` and `https:///host` parse as https://host/: a typo read as something else.
    if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || !AUTHORITY.test(value)) {
      context.addIssue({ code: 'custom', input: value, message: 'expected an http or https URL' });
    } else if (url.username !== '' || url.password !== '') {
      context.addIssue({
        code: 'custom',
        input: maskedUrl(value),
        message: `expected a url without user or password, ${credentials}`,
      });
    }
  });

/** A webhook's url. */
export const httpUrl = urlWithout(
  "which are never sent (set an Authorization header in the webhook's headers instead)",
);

/** A secret manager's endpoint (secrets.aws.endpoint): its SDK signs requests with the credentials of its own chain. */
export const endpointUrl = urlWithout(
  'which are not used (the AWS SDK takes its credentials from its default chain: the environment, a profile or a role)',
);

/** The url without user or password, for logs and the webhooks table. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return '<invalid url>';
  }
}

/**
 * The url as written, with any password of its user:password@ replaced by
 * ***: for a problem line that must show the url, not its secret. (The last @
 * before the path ends the user information, as URL parsing reads it.)
 */
export function maskedUrl(url: string): string {
  return url.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#]*@/, '$1***@');
}
