import { z } from 'zod';
import { maskedUrl, URL_REWRITTEN_CHARACTER } from './urls.js';

/**
 * network.proxy: http://host:port of an HTTP CONNECT proxy. Credentials are
 * refused here, where the document would hold them in clear: a proxy that
 * needs them is given as HTTPS_PROXY from a secret instead.
 */
const proxyUrl = z.string({ error: 'expected an http:// URL of a proxy' }).superRefine((value, context) => {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || url.protocol !== 'http:' || url.hostname === '' || URL_REWRITTEN_CHARACTER.test(value)) {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value).slice(0, 80),
      message: 'expected an http:// URL of a proxy, such as http://proxy.internal:3128',
    });
  } else if (url.username !== '' || url.password !== '') {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value),
      message:
        'expected a proxy url without user or password (leave network.proxy unset and give HTTPS_PROXY from a secret instead)',
    });
  } else if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    context.addIssue({
      code: 'custom',
      input: maskedUrl(value).slice(0, 80),
      message: 'expected a proxy url of a scheme, host and port only',
    });
  }
});

/** `network`: which receivers may be reached, and through what. */
export const network = z.strictObject({
  /** Loopback and private ranges are refused unless true. */
  allowPrivateAddresses: z.boolean({ error: 'expected true or false' }).default(false),
  /**
   * An HTTP CONNECT proxy every request to a receiver goes through. No
   * default: unset, HTTPS_PROXY/HTTP_PROXY/NO_PROXY are honoured.
   */
  proxy: proxyUrl.optional(),
});
