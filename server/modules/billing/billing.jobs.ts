import { repositoryOf } from '../../kit/runtime.js';
import type { AppDeps } from '../../kit/deps.js';
import { defineJob, noPayload } from '../../kit/jobs.js';
import type { RunningWorker } from '../../kit/module.js';
import { runDueBilling } from './renewals.js';

/**
 * Renewals and charge retries that are due, in batches (renewals.ts). Sent by the billing scheduler when something
 * falls due, and every minute by cron as a safety net; several at once share the work (SKIP LOCKED). Retried on a
 * failure: every step is idempotent.
 */
export const billingRunDueJob = defineJob(
  'billing.run-due',
  async (deps) => {
    const done = await runDueBilling(deps);
    if (done.renewals + done.retries > 0) deps.log.debug(done, 'billing: renewals and retries done');
  },
  { cron: '* * * * *', retryLimit: 5, retryDelaySeconds: 1, expireInSeconds: 600, payload: noPayload },
);

/** The name of the scheduler's worker; services reach the scheduler as `runtimeOf(deps, 'billing').scheduler`. */
export const BILLING_SCHEDULER = 'billing.scheduler';

/**
 * Queues `billing.run-due` when the next period end or retry falls due. It keeps no state of its own: it reads the
 * next due time from the database at start, after every nudge (a change that set a due time) and at least every
 * few seconds, so a restart or another process's change loses nothing.
 */
export class BillingScheduler implements RunningWorker {
  private timer: NodeJS.Timeout | undefined;
  /** Built with the process (billing.module.ts), it reads nothing until its worker starts it. */
  private started = false;
  private stopped = false;
  private checking: Promise<void> = Promise.resolve();

  constructor(private readonly deps: AppDeps) {}

  /** How often the next due time is read again, at most. */
  private get recheckMs(): number {
    const p = this.deps.config.billing.period;
    return 'ms' in p ? Math.min(5000, Math.max(250, Math.floor(p.ms / 4))) : 5000;
  }

  start(): void {
    this.started = true;
    this.nudge();
  }

  /** Reads the next due time again now (after a commit that may have set an earlier one). */
  nudge(): void {
    if (!this.started || this.stopped) return;
    this.checking = this.checking.then(() => this.check()).catch(() => {});
  }

  private async check(): Promise<void> {
    if (this.stopped) return;
    let wait = this.recheckMs;
    try {
      const repository = repositoryOf(this.deps, 'billing');
      const due = await repository.nextDueAt(repository.fork());
      const now = this.deps.clock.now();
      if (due && due <= now) {
        await this.deps.jobs.send(billingRunDueJob, {});
        // The sweep takes a moment; look again shortly after.
        wait = Math.min(wait, 1000);
      } else if (due) {
        wait = Math.min(wait, due.getTime() - now.getTime() + 10);
      }
    } catch (err) {
      this.deps.log.warn({ err }, 'billing scheduler could not read the next due time; will retry');
    }
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.nudge(), Math.max(10, wait));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.checking;
  }
}
