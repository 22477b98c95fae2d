/** What startService has started, released in reverse order by one function. */
export class Started {
  private readonly releases: Array<() => Promise<void> | void> = [];

  /** Registers how to release what was just started. */
  add(release: () => Promise<void> | void): void {
    this.releases.push(release);
  }

  /** Releases everything, last started first; every release runs even when one fails. */
  async releaseAll(): Promise<void> {
    let failure: unknown;
    for (const release of this.releases.splice(0).reverse()) {
      try {
        await release();
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
}
