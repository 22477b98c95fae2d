import { beforeEach, expect } from 'vitest';

/**
 * Every test asserts something, unconditionally: a test that only waits for
 * a condition (and passes when nothing throws), or whose every expect sits
 * behind an `if`, cannot fail for the reason its name gives. One that makes
 * no assertion fails here. (Assertions made in afterEach hooks, such as the
 * payload schema check, do not count: vitest counts before they run.)
 *
 * A concurrent test counts the assertions of its own `expect` (its context's,
 * which concurrent tests must use), a test that runs alone the global one's.
 */
beforeEach((context) => {
  if (context.task.concurrent) context.expect.hasAssertions();
  else expect.hasAssertions();
});
