import { router } from '../../trpc/init.js';
import { requireRole } from '../../trpc/procedures.js';
import { ZListAuditLogsInput, ZListAuditLogsOutput } from './audit.schema.js';
import * as audit from './audit.service.js';

export const auditRouter = router({
  list: requireRole('owner', 'admin')
    .meta({
      openapi: {
        method: 'GET',
        path: '/audit-logs',
        tags: ['Audit log'],
        summary: "The organization's audit log",
        description:
          'Every change made through the API (each mutation answered 2xx), every refused one (401, 402, 403, 409), ' +
          'and failed logins (`auth.login_failed`), newest first, kept 365 days. Owners and admins only. Entries ' +
          'name the actor, the procedure, its target and the request, never a request body.',
      },
    })
    .input(ZListAuditLogsInput)
    .output(ZListAuditLogsOutput)
    .query(({ ctx, input }) => audit.listAuditLogs(ctx, input)),
});
