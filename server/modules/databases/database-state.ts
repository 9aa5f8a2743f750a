import { conflict } from '../../lib/errors.js';
import { DATABASE_STATUSES, type DatabaseStatus } from './databases.constants.js';

/**
 * The life of a managed database (docs/managed-databases.md, "Statuses"): the one place that says which status may
 * follow which. The services (update, delete, cancel-deletion) and the readiness job change a status only through
 * {@link transition}, which refuses anything else. A removal keeps `deleting` and sets `removed_at`.
 *
 *     creating ──▶ running ──▶ resizing ──▶ running
 *        └──────▶ failed
 *     creating, running, resizing, failed ──▶ deleting ──▶ running (cancel-deletion)
 */

export { DATABASE_STATUSES, type DatabaseStatus };

/** Which status may follow which. */
export const DATABASE_TRANSITIONS: Readonly<Record<DatabaseStatus, readonly DatabaseStatus[]>> = {
  creating: ['running', 'failed', 'deleting'],
  running: ['resizing', 'deleting'],
  resizing: ['running', 'deleting'],
  failed: ['deleting'],
  deleting: ['running'],
};

export function canTransition(from: DatabaseStatus, to: DatabaseStatus): boolean {
  return DATABASE_TRANSITIONS[from].includes(to);
}

/** 409 CONFLICT ("The database is <status>: it cannot become <to>") unless `d` may move to `to`; changes nothing. */
export function assertCanTransition(d: { status: DatabaseStatus }, to: DatabaseStatus): void {
  if (!canTransition(d.status, to)) throw conflict(`The database is ${d.status}: it cannot become ${to}`);
}

/** Moves `d` to `to` at `now`, or throws 409 CONFLICT when the state machine does not allow it. */
export function transition(
  d: { status: DatabaseStatus; updatedAt: Date },
  to: DatabaseStatus,
  now: Date,
): void {
  assertCanTransition(d, to);
  d.status = to;
  d.updatedAt = now;
}
