import { positiveInteger, timeOption } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { table } from '../output.js';

interface ListOptions {
  actor?: string;
  action?: string;
  target?: string;
  since?: string;
  until?: string;
  limit?: number;
  after?: string;
}

export default defineCommandGroup({
  name: 'audit',
  register(program, cli) {
    const audit = program
      .command('audit')
      .description('the audit log: who did what, when (owners and admins)');

    documented(audit.command('list'), {
      calls: ['auditList'],
      examples: [
        'cloud audit list --since 1d',
        'cloud audit list --actor usr_abc123 --action vpn.connections.create',
        'cloud audit list --target db_abc123 --json',
      ],
    })
      .description('list audit entries, newest first, with filters')
      .option('--actor <id>', 'only entries of this user (usr_…) or API key (key_…)')
      .option('--action <action>', 'only this action: vpn.connections.create, auth.login_failed, …')
      .option('--target <id>', 'only entries about this resource')
      .option('--since <time>', 'at or after: ISO 8601, or 90m, 12h, 3d ago', timeOption)
      .option('--until <time>', 'before: ISO 8601, or 90m, 12h, 3d ago', timeOption)
      .option('--limit <n>', 'entries per page', positiveInteger)
      .option('--after <id>', 'the entries after this one (aud_…): the next page')
      .action(async (o: ListOptions) => {
        const res = await cli.client().audit.list.query({
          ...(o.actor ? { actor_id: o.actor } : {}),
          ...(o.action ? { action: o.action } : {}),
          ...(o.target ? { target_id: o.target } : {}),
          ...(o.since ? { since: o.since } : {}),
          ...(o.until ? { until: o.until } : {}),
          ...(o.limit !== undefined ? { limit: o.limit } : {}),
          ...(o.after ? { starting_after: o.after } : {}),
        });
        cli.print(res, () => {
          const rows = table(res.audit_logs, {
            time: (e) => e.created_at,
            actor: (e) => e.actor.email ?? e.actor.id,
            action: (e) => e.action,
            target: (e) => (e.target ? e.target.id : ''),
            status: (e) => e.status,
            ip: (e) => e.ip,
          });
          const last = res.audit_logs.at(-1);
          return res.has_more && last ? `${rows}\n(more: --after ${last.id})` : rows;
        });
      });
  },
});
