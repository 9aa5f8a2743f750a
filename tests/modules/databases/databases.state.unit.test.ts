// Test tier: unit
import { expect } from 'chai';
import { AppError } from '../../../server/lib/errors.js';
import {
  BACKUP_STATUSES,
  BACKUP_TRANSITIONS,
  transition as moveBackup,
} from '../../../server/modules/databases/backup-state.js';
import {
  DATABASE_STATUSES,
  DATABASE_TRANSITIONS,
  transition as moveDatabase,
} from '../../../server/modules/databases/database-state.js';

/** The databases' and backups' state machines (database-state.ts, backup-state.ts): each move allowed or refused. */
describe('Databases state machines (unit)', () => {
  const then = new Date('2026-11-01T00:00:00.000Z');
  const now = new Date('2026-11-01T00:01:00.000Z');

  it('a database moves only along DATABASE_TRANSITIONS; any other move is 409 and changes nothing', () => {
    for (const from of DATABASE_STATUSES) {
      for (const to of DATABASE_STATUSES) {
        const d = { status: from, updatedAt: then };
        if (DATABASE_TRANSITIONS[from].includes(to)) {
          moveDatabase(d, to, now);
          expect(d).to.deep.equal({ status: to, updatedAt: now });
        } else {
          const err = (() => {
            try {
              moveDatabase(d, to, now);
            } catch (e) {
              return e;
            }
          })();
          expect(err, `${from} → ${to}`).to.be.instanceOf(AppError);
          expect((err as AppError).code).to.equal('CONFLICT');
          expect(d).to.deep.equal({ status: from, updatedAt: then });
        }
      }
    }
    // What the services and jobs rely on.
    expect(DATABASE_TRANSITIONS.deleting).to.deep.equal(['running']);
    expect(DATABASE_TRANSITIONS.failed).to.deep.equal(['deleting']);
  });

  it('a backup moves only along BACKUP_TRANSITIONS: completed is final, a failed final backup may complete', () => {
    for (const from of BACKUP_STATUSES) {
      for (const to of BACKUP_STATUSES) {
        const b = { id: 'backup_x', status: from, updatedAt: then };
        const allowed = BACKUP_TRANSITIONS[from].includes(to);
        if (allowed) moveBackup(b, to, now);
        else expect(() => moveBackup(b, to, now), `${from} → ${to}`).to.throw(AppError, /cannot become/);
        expect(b.status).to.equal(allowed ? to : from);
      }
    }
    expect(BACKUP_TRANSITIONS.completed).to.deep.equal([]);
    expect(BACKUP_TRANSITIONS.failed).to.deep.equal(['completed']);
  });
});
