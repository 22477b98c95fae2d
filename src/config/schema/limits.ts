/**
 * Sizes no sensible document reaches. Past them a document is refused with a
 * line naming the limit, rather than accepted and failing at every delivery
 * (a receiver answers 414 or 431) or costing seconds and gigabytes to parse.
 */

/** Characters of one url (a webhook's, or an endpoint's). */
export const MAX_URL_LENGTH = 8192;
/** Bytes of one configured header, name and value (ISO-8859-1: one byte a character). */
export const MAX_HEADER_BYTES = 8192;
/** Bytes of all configured headers of one webhook, names and values. */
export const MAX_HEADERS_BYTES = 16_384;
/** Bytes of the whole document, checked before it is parsed. */
export const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;
