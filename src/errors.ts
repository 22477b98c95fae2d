/**
 * Errors that reach a user. A {@link UserError} is something the user can fix
 * (an invalid configuration, an unknown id, an unreachable database): the
 * command line prints its message, one line per problem, and exits 1. Anything
 * else is a bug and is shown with its stack.
 */
export class UserError extends Error {
  /** One line per problem, each naming what is wrong and what was expected. */
  readonly problems: readonly string[];

  constructor(code: string, problems: string | readonly string[], options?: { cause?: unknown }) {
    const list = typeof problems === 'string' ? [problems] : problems;
    super(list.join('\n'), options);
    this.name = 'UserError';
    this.code = code;
    this.problems = list;
  }

  /** Stable machine-readable code, e.g. `config_invalid`, `database_unreachable`. */
  readonly code: string;
}

/** The database schema is older or newer than this code. */
export class SchemaVersionError extends UserError {
  constructor(
    message: string,
    readonly databaseVersion: number,
    readonly codeVersion: number,
  ) {
    super('schema_version', message);
    this.name = 'SchemaVersionError';
  }
}
