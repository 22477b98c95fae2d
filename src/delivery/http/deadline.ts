/**
 * A request's overall deadline: aborts its signal with a TimeoutError, as
 * AbortSignal.timeout() would, but its timer is cleared as soon as the request
 * is done. AbortSignal.timeout()'s timer lives until it fires or its signal is
 * garbage-collected, so the timers and signals a process holds would grow
 * with the request rate times the timeout; with a cleared Deadline only the
 * requests still in flight hold one.
 */
export class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;

  constructor(ms: number) {
    this.timer = setTimeout(
      () => this.controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
      ms,
    );
    // As AbortSignal.timeout()'s: the deadline alone never keeps the process running.
    this.timer.unref();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}
