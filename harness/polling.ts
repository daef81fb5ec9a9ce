/**
 * @module harness/polling — waiting on state another process changes and that sends no event (a restarted
 * worker's pid, a metrics value, a queue depth): poll it, and fail with what was awaited, never wait
 * forever.
 */

/**
 * Poll `check` every `intervalMs` until it returns a truthy value (returned) or `timeoutMs` passes (throws naming
 * `what`). A short interval suits in-process state that may hold only briefly (a lane's waiting count).
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 15_000,
  intervalMs = 20,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
