/**
 * A worker loop's sleep that a nudge ends early. A nudge that comes while the loop is busy is remembered, so the
 * next sleep returns at once (no lost wake-ups).
 */
export class WakeSignal {
  private pending = false;
  private wakeUp: (() => void) | undefined;

  nudge(): void {
    this.pending = true;
    this.wakeUp?.();
  }

  /** Forgets earlier nudges: call right before looking for work. */
  reset(): void {
    this.pending = false;
  }

  sleep(ms: number): Promise<void> {
    if (this.pending) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}
