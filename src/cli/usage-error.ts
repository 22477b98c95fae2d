/**
 * A value of a command-line argument or option that the command does not
 * take: bad usage, exit 2. The option parsers throw it instead of
 * commander's InvalidArgumentError, whose message repeats the value whole
 * (`argument '<120 KB>' is invalid`); this message quotes only a prefix of
 * it (quotedPrefix), and main.ts prints it.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
