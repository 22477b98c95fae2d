/**
 * Whether a file's text looks like a secret rather than a document: the rule
 * that decides, before anything of a file is quoted in a message or a log
 * line, that nothing of it may be (a configuration document or a binding
 * given the path of a key file by mistake). It is kept broad on purpose: a
 * document it wrongly takes for a secret only loses the quote in its error.
 *
 * A text looks like a secret when it holds
 * - a Standard Webhooks signing key: `whsec_` followed by base64, anywhere;
 * - a PEM block: a line `-----BEGIN ...-----` (private keys, certificates), anywhere;
 * - or, leading and trailing white space aside, nothing but one line of at
 *   least 16 token characters (letters, digits and `+/=_-.~`, as base64,
 *   base64url, hex and JWTs are written) mixing at least two of lower case,
 *   upper case and digits: an API key, a token, a password file.
 *
 * @returns what it looks like, for a message ("a Standard Webhooks key
 * (whsec_...)"), or undefined.
 */
export function secretLikeness(text: string): string | undefined {
  // One scan of a bounded prefix: a key file is small, and a document's own text is checked by its parser.
  const head = text.length > 65_536 ? text.slice(0, 65_536) : text;
  if (/whsec_[A-Za-z0-9+/]{8,}/.test(head)) return 'a Standard Webhooks key (whsec_...)';
  if (/^-----BEGIN [A-Z0-9 ]{1,64}-----\s*$/m.test(head)) return 'a PEM block (-----BEGIN ...-----)';
  const trimmed = text.trim();
  if (trimmed.length >= 16 && trimmed.length <= 8192 && /^[A-Za-z0-9+/=_.~-]+$/.test(trimmed)) {
    const classes = [/[a-z]/, /[A-Z]/, /[0-9]/].filter((pattern) => pattern.test(trimmed)).length;
    if (classes >= 2) return 'a single line of token characters (an API key or token)';
  }
  return undefined;
}
