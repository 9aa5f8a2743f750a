import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { purgeAuditLogJob } from './audit.jobs.js';
import { MikroOrmAuditRepository, type AuditRepository } from './audit.repository.js';
import { auditRouter } from './audit.router.js';

/** What the audit module keeps per process (`deps.modules.audit`). */
export interface AuditRuntime {
  /** Its reads of the audit log and the retention purge (audit.repository.ts). */
  readonly repository: AuditRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    audit: AuditRuntime;
  }
}

/**
 * Reading the audit log. The entries are written by every mutation through server/events/audit.ts (the table and
 * its entity belong to the core, which writes it).
 */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const auditModule: ModuleManifest<'audit', AuditRuntime> = defineModule({
  name: 'audit',
  router: auditRouter,
  create: (deps: AppDeps): AuditRuntime => ({ repository: new MikroOrmAuditRepository(deps.db) }),
  jobs: [purgeAuditLogJob],
});
