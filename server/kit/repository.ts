import type { Database, Em } from '../db/orm.js';
import type { EventDefinition } from '../events/define-event.js';
import { recordEvent } from '../events/record-event.js';

/**
 * What every module's MikroORM repository shares (docs/adding-a-module.md, "Checklist", step 3): units of work on the
 * process's database, transactions, and events recorded in them. A module's repository extends it and adds its
 * queries; an in-memory repository of a unit test implements the module's interface on its own.
 */
export abstract class MikroOrmRepository {
  // The database of the process: the units of work the callers hand in are its forks.
  constructor(protected readonly db: Database) {}

  /** A unit of work of its own (a job, a stream: no request's to use). */
  fork(): Em {
    return this.db.orm.em.fork();
  }

  transaction<R>(em: Em, work: (tx: Em) => Promise<R>): Promise<R> {
    return em.transactional(work);
  }

  async flush(tx: Em): Promise<void> {
    await tx.flush();
  }

  recordEvent<P>(tx: Em, event: EventDefinition<P>, payload: P, organizationId: string, now: Date): void {
    recordEvent(tx, event, payload, organizationId, now);
  }
}
