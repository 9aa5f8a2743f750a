import { inspect } from 'node:util';

/** What a probe returns while the condition does not hold yet. */
export type NotYet = undefined | null | false | 0 | '';

export interface WaitOptions {
  /** How long to keep trying (15 s by default): a deadline for something broken, not a timing assertion. */
  timeoutMs?: number;
  /** The pause between two tries (25 ms by default). */
  intervalMs?: number;
}

/**
 * Polls `probe` until it returns a truthy value, and returns that value. A probe that throws ends the wait with its
 * error at once (a probe checks for a state that can never come right, such as a failed job, and throws); a probe
 * that can fail while the condition does not hold yet (a server still starting) catches that itself and returns
 * undefined. Past `timeoutMs` it throws an Error naming `what` and the probe's last answer; `what` may be a function,
 * called then, to describe what was seen last.
 */
export async function waitFor<T>(
  what: string | (() => string),
  probe: () => T | Promise<T>,
  { timeoutMs = 15_000, intervalMs = 25 }: WaitOptions = {},
): Promise<Exclude<Awaited<T>, NotYet>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as Exclude<Awaited<T>, NotYet>;
    const left = deadline - Date.now();
    if (left < 0) {
      const description = typeof what === 'function' ? what() : what;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${description} (last: ${inspect(value, { breakLength: Infinity })})`,
      );
    }
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, left)));
  }
}

/**
 * Waits until a server started as a child process answers `GET /readyz` with 200. It fails at once when the child
 * exits, and names its stderr (`stderr()`, what it wrote so far) then and on timeout (90 s: a loaded machine starts
 * slowly).
 */
export async function waitForServerStart(
  baseUrl: string,
  child: { exitCode: number | null },
  stderr: () => string,
): Promise<void> {
  await waitFor(
    () => `the server to start (its stderr: ${stderr()})`,
    async () => {
      if (child.exitCode !== null) throw new Error(`server exited: ${stderr()}`);
      try {
        return (await fetch(`${baseUrl}/readyz`)).status === 200;
      } catch {
        return false; // not listening yet
      }
    },
    { timeoutMs: 90_000, intervalMs: 100 },
  );
}
