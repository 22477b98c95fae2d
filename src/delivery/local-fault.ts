/**
 * Whether the error, or one of its causes, says this process ran out of a
 * resource of its own: file descriptors (EMFILE, ENFILE) or memory (ENOMEM,
 * ENOBUFS, Node's ERR_MEMORY_ALLOCATION_FAILED, a buffer or array that could
 * not be allocated). A request that failed so may never have left the
 * process, and says nothing of its receiver; a database write that failed so
 * may succeed once the resources are back.
 */
export function isLocalFault(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth += 1) {
    if (current instanceof AggregateError && current.errors.some(isLocalFault)) return true;
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && LOCAL_FAULT_CODES.has(code)) return true;
    if (current instanceof RangeError && typeof message === 'string' && /allocation failed/i.test(message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

const LOCAL_FAULT_CODES = new Set(['EMFILE', 'ENFILE', 'ENOMEM', 'ENOBUFS', 'ERR_MEMORY_ALLOCATION_FAILED']);
