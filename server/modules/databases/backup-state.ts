import { conflict } from '../../lib/errors.js';
import { BACKUP_STATUSES, type BackupStatus } from './databases.constants.js';

/**
 * The life of a backup (docs/managed-databases.md, "Statuses"): the one place that says which status may follow
 * which. The completion job and the removal of a database change a status only through {@link transition}, which
 * refuses anything else.
 *
 *     pending ──▶ completed
 *        └──────▶ failed ──▶ completed (a final backup dumped again when its database is removed)
 */

export { BACKUP_STATUSES, type BackupStatus };

/** Which status may follow which. */
export const BACKUP_TRANSITIONS: Readonly<Record<BackupStatus, readonly BackupStatus[]>> = {
  pending: ['completed', 'failed'],
  completed: [],
  failed: ['completed'],
};

export function canTransition(from: BackupStatus, to: BackupStatus): boolean {
  return BACKUP_TRANSITIONS[from].includes(to);
}

/** 409 CONFLICT ("Backup <id> is <status>: it cannot become <to>") unless `b` may move to `to`; changes nothing. */
export function assertCanTransition(b: { id: string; status: BackupStatus }, to: BackupStatus): void {
  if (!canTransition(b.status, to)) throw conflict(`Backup ${b.id} is ${b.status}: it cannot become ${to}`);
}

/** Moves `b` to `to` at `now`, or throws 409 CONFLICT when the state machine does not allow it. */
export function transition(
  b: { id: string; status: BackupStatus; updatedAt: Date },
  to: BackupStatus,
  now: Date,
): void {
  assertCanTransition(b, to);
  b.status = to;
  b.updatedAt = now;
}
