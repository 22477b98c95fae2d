/**
 * For a command that works in committed chunks (backfill, reconcile): the
 * first SIGINT or SIGTERM aborts the returned signal, so the command stops
 * once the chunk in progress commits, and removes these handlers, so that a
 * second signal ends the process at once. `release` removes them when the
 * command ends first.
 */
export function stopAfterChunk(): { readonly signal: AbortSignal; release(): void } {
  const abort = new AbortController();
  const release = (): void => {
    process.removeListener('SIGINT', stop).removeListener('SIGTERM', stop);
  };
  const stop = (): void => {
    process.stderr.write('stopping after the current chunk commits (again to stop at once)\n');
    abort.abort();
    release();
  };
  process.on('SIGINT', stop).on('SIGTERM', stop);
  return { signal: abort.signal, release };
}
