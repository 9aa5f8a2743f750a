import { defineModule } from '../../kit/module.js';
import { purgeAuditLogJob } from './audit.jobs.js';
import { auditRouter } from './audit.router.js';

/**
 * Reading the audit log. The entries are written by every mutation through server/events/audit.ts (the table and
 * its entity belong to the core, which writes it).
 */
export const auditModule = defineModule({
  name: 'audit',
  router: auditRouter,
  jobs: [purgeAuditLogJob],
});
