import type { Clock } from '../../server/lib/time.js';

/** A clock that only moves when told to: for throttling windows, token expiry, quota periods. */
export class FakeClock implements Clock {
  private t: number;
  constructor(start: Date | string = '2026-11-21T08:00:00.000Z') {
    this.t = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(at: Date | string): void {
    this.t = new Date(at).getTime();
  }
}
