import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields, table } from '../output.js';

type CreateInput = RouterInputs['users']['create'];
type UpdateInput = RouterInputs['users']['update'];
type ListInput = NonNullable<Exclude<RouterInputs['users']['list'], void>>;
type PermissionPatch = RouterInputs['users']['updatePermissions']['permissions'];
type User = RouterOutputs['users']['get']['user'];

/** `--permission` may be repeated, and each may be a comma-separated list. */
function collectPermissions(value: string, previous: string[] = []): string[] {
  const more = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (more.length === 0) throw new CliError('--permission needs a value such as vpn:write', EXIT.USAGE);
  return [...previous, ...more];
}

/**
 * `--grant vpn:write --revoke database:delete` as the API's object form: `{vpn: {write: true}, database: {delete:
 * false}}`. Resources and levels the API does not know are refused there (400).
 */
function permissionPatch(grant: string[], revoke: string[]): PermissionPatch {
  const patch: Record<string, Record<string, boolean>> = {};
  for (const [list, value] of [
    [grant, true],
    [revoke, false],
  ] as const) {
    for (const permission of list) {
      const [resource, level, extra] = permission.split(':');
      if (!resource || !level || extra !== undefined) {
        throw new CliError(`not a permission: ${permission} (resource:level, e.g. vpn:write)`, EXIT.USAGE);
      }
      (patch[resource] ??= {})[level] = value;
    }
  }
  return patch;
}

const userFields = (u: User) =>
  fields({
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    status: u.status,
    permissions: u.permissions.join(','),
    'two-factor': u.two_factor_enabled ? 'on' : 'off',
    'last login': u.last_login ?? 'never',
    created: u.created_at,
  });

export default defineCommandGroup({
  name: 'users',
  register(program, cli) {
    const users = program
      .command('users')
      .description('the members of the organization: invite, roles, permissions, suspend, remove');

    documented(users.command('list'), {
      calls: ['usersList'],
      examples: ['cloud users list', 'cloud users list --role admin --status active'],
    })
      .description('list the users of the organization')
      .option('--role <role>', 'only owner, admin or member')
      .option('--status <status>', 'only users in this state (active, invited, suspended)')
      .option('--page <n>', 'the page, from 1', positiveInteger)
      .option('--limit <n>', 'users per page', positiveInteger)
      .action(async (o: { role?: string; status?: string; page?: number; limit?: number }) => {
        const res = await cli.client().users.list.query({
          ...(o.role ? { role: o.role as ListInput['role'] } : {}),
          ...(o.status ? { status: o.status as ListInput['status'] } : {}),
          ...(o.page !== undefined ? { page: o.page } : {}),
          ...(o.limit !== undefined ? { limit: o.limit } : {}),
        });
        cli.print(res, () => {
          const rows = table(res.users, {
            id: (u) => u.id,
            email: (u) => u.email,
            name: (u) => u.name,
            role: (u) => u.role,
            status: (u) => u.status,
            'last login': (u) => u.last_login ?? 'never',
          });
          return res.has_more && res.page !== null
            ? `${rows}\n(${res.users.length} of ${res.total}: next page with --page ${res.page + 1})`
            : rows;
        });
      });

    documented(users.command('invite'), {
      calls: ['usersCreate'],
      examples: [
        'cloud users invite grace@example.com --name Grace',
        'cloud users invite ops@example.com --role admin --no-mail',
        'cloud users invite dev@example.com --permission vpn:write,hosting:write',
      ],
    })
      .description('invite someone to the organization (mailed a link, or --no-mail to print it)')
      .argument('<email>', 'their email address')
      .option('--name <name>', 'their display name (default: the part of the email before @)')
      .option('--role <role>', 'member (default) or admin (the owner only)')
      .option(
        '--permission <permission>',
        'a permission beyond the role’s (vpn:write, …): repeat it or give a comma-separated list',
        collectPermissions,
      )
      .option('--no-mail', 'do not mail the invitation: print its link (valid 7 days, single use) to share')
      .action(
        async (email: string, o: { name?: string; role?: string; permission?: string[]; mail: boolean }) => {
          const res = await cli.client().users.create.mutate({
            email,
            ...(o.name ? { name: o.name } : {}),
            ...(o.role ? { role: o.role as CreateInput['role'] } : {}),
            ...(o.permission
              ? { permissions: [...new Set(o.permission)] as CreateInput['permissions'] }
              : {}),
            send_invitation: o.mail,
          });
          cli.print(res, () =>
            [
              userFields(res.user),
              '',
              res.invitation_url
                ? `Invitation link (shown only now; share it with ${email} only):\n${res.invitation_url}`
                : `Invitation mailed to ${email}.`,
            ].join('\n'),
          );
        },
      );

    documented(users.command('show'), {
      calls: ['usersGet', 'usersGetPermissions'],
      examples: ['cloud users show usr_abc123'],
    })
      .description('show a user: role, status, permissions and activity')
      .argument('<id>', 'the user id (usr_…)')
      .action(async (id: string) => {
        const client = cli.client();
        const [{ user }, { permissions }] = await Promise.all([
          client.users.get.query({ id }),
          client.users.getPermissions.query({ id }),
        ]);
        cli.print({ user, permissions }, () =>
          [
            userFields(user),
            '',
            table(Object.entries(permissions), {
              resource: ([resource]) => resource,
              allowed: ([, levels]) =>
                Object.entries(levels)
                  .filter(([, on]) => on)
                  .map(([level]) => level)
                  .join(',') || '-',
            }),
          ].join('\n'),
        );
      });

    documented(users.command('update'), {
      calls: ['usersUpdate'],
      examples: [
        'cloud users update usr_abc123 --role admin',
        'cloud users update usr_abc123 --suspend',
        'cloud users update usr_abc123 --permissions vpn:read,vpn:write',
      ],
    })
      .description('change a user: name, role, the whole permission set; suspend or reactivate them')
      .argument('<id>', 'the user id (usr_…)')
      .option('--name <name>', 'a new display name')
      .option('--role <role>', 'member or admin (the owner only); resets the permissions to the role’s')
      .option(
        '--permissions <list>',
        'the complete new permission set, comma-separated (replaces the current one)',
      )
      .option('--suspend', 'sign them out everywhere and refuse their tokens')
      .option('--reactivate', 'let a suspended user back in')
      .action(
        async (
          id: string,
          o: { name?: string; role?: string; permissions?: string; suspend?: boolean; reactivate?: boolean },
        ) => {
          if (o.suspend && o.reactivate)
            throw new CliError('give --suspend or --reactivate, not both', EXIT.USAGE);
          const input: UpdateInput = {
            id,
            ...(o.name ? { name: o.name } : {}),
            ...(o.role ? { role: o.role as UpdateInput['role'] } : {}),
            ...(o.permissions !== undefined
              ? {
                  permissions: o.permissions
                    .split(',')
                    .map((p) => p.trim())
                    .filter(Boolean) as UpdateInput['permissions'],
                }
              : {}),
            ...(o.suspend
              ? { status: 'suspended' as const }
              : o.reactivate
                ? { status: 'active' as const }
                : {}),
          };
          if (Object.keys(input).length === 1) {
            throw new CliError('nothing to change: give at least one option (see --help)', EXIT.USAGE);
          }
          const res = await cli.client().users.update.mutate(input);
          cli.print(res, () => userFields(res.user));
        },
      );

    documented(users.command('permissions'), {
      calls: ['usersGetPermissions', 'usersUpdatePermissions'],
      examples: [
        'cloud users permissions usr_abc123',
        'cloud users permissions usr_abc123 --grant hosting:write --revoke database:delete',
      ],
    })
      .description('show a user’s permissions, or grant and revoke some (the others stay as they are)')
      .argument('<id>', 'the user id (usr_…)')
      .option(
        '--grant <permission>',
        'resource:level to allow (repeatable, or comma-separated)',
        collectPermissions,
      )
      .option(
        '--revoke <permission>',
        'resource:level to take away (repeatable, or comma-separated)',
        collectPermissions,
      )
      .action(async (id: string, o: { grant?: string[]; revoke?: string[] }) => {
        const client = cli.client();
        const res =
          o.grant || o.revoke
            ? await client.users.updatePermissions.mutate({
                id,
                permissions: permissionPatch(o.grant ?? [], o.revoke ?? []),
              })
            : await client.users.getPermissions.query({ id });
        cli.print(res, () =>
          table(Object.entries(res.permissions), {
            resource: ([resource]) => resource,
            ...Object.fromEntries(
              ['read', 'write', 'delete'].map((level) => [
                level,
                ([, levels]: [string, Record<string, boolean>]) =>
                  level in levels ? (levels[level] ? 'yes' : 'no') : '',
              ]),
            ),
          }),
        );
      });

    documented(users.command('remove'), {
      calls: ['usersGet', 'usersDelete'],
      examples: ['cloud users remove usr_abc123 --yes'],
    })
      .description('remove a user; their VPN connections, databases and sites become yours (asks first)')
      .argument('<id>', 'the user id (usr_…)')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .action(async (id: string, o: { yes?: boolean }) => {
        const client = cli.client();
        await cli.confirm(
          async () => {
            const { user } = await client.users.get.query({ id });
            return `Remove ${user.email} (${user.role})? Their resources are transferred to you.`;
          },
          o.yes,
          'removing a user',
        );
        const res = await client.users.delete.mutate({ id });
        cli.print(
          res,
          () => `Removed ${res.email}; their resources now belong to ${res.resources_transferred_to}.`,
        );
      });

    documented(users.command('accept-invitation'), {
      calls: ['usersAcceptInvitation'],
      examples: ['cloud users accept-invitation --token inv_tok_abc123 --password-stdin < password.txt'],
    })
      .description('accept an invitation: choose your password (then `cloud login`)')
      .requiredOption('--token <token>', 'the token of the invitation link')
      .option('--password-stdin', 'read the new password from standard input instead of asking')
      .action(async (o: { token: string; passwordStdin?: boolean }) => {
        const password = await cli.password(o.passwordStdin, 'Choose a password: ');
        const client = cli.anonymousClient({ baseUrl: cli.apiUrl(undefined) });
        const res = await client.users.acceptInvitation.mutate({ token: o.token, password });
        cli.print(res, () => `${res.message}\nSign in with: cloud login --email ${res.user.email}`);
      });
  },
});
