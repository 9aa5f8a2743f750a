import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields, table } from '../output.js';

type Permissions = RouterInputs['apiKeys']['create']['permissions'];
type ApiKey = RouterOutputs['apiKeys']['get']['api_key'];

/** `--permission` may be repeated, and each may be a comma-separated list. */
function collectPermissions(value: string, previous: string[] = []): string[] {
  const more = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (more.length === 0) throw new CliError('--permission needs a value such as vpn:read', EXIT.USAGE);
  return [...previous, ...more];
}

const keyFields = (k: ApiKey, secret?: string) =>
  fields({
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    permissions: k.permissions.join(','),
    'created by': k.created_by,
    created: k.created_at,
    expires: k.expires_at,
    'last used': k.last_used_at ?? 'never',
    ...(secret ? { secret } : {}),
  });

export default defineCommandGroup({
  name: 'api-keys',
  register(program, cli) {
    const keys = program
      .command('api-keys')
      .description('API keys for scripts and CI (owners and admins; use one with CLOUD_API_KEY)');

    documented(keys.command('create'), {
      calls: ['apiKeysCreate'],
      examples: ['cloud api-keys create ci --permission vpn:read,hosting:write --expires-in-days 30'],
    })
      .description('create an API key; its secret is printed once, now')
      .argument('<name>', 'a name to recognise the key by')
      .requiredOption(
        '--permission <permission>',
        'a permission the key may use (vpn:read, hosting:write, …): repeat it or give a comma-separated list',
        collectPermissions,
      )
      .option(
        '--expires-in-days <days>',
        'days until the key expires, 1 to 365 (default 90)',
        positiveInteger,
      )
      .action(async (name: string, o: { permission: string[]; expiresInDays?: number }) => {
        const res = await cli.client().apiKeys.create.mutate({
          name,
          permissions: [...new Set(o.permission)] as Permissions,
          ...(o.expiresInDays !== undefined ? { expires_in_days: o.expiresInDays } : {}),
        });
        cli.print(res, () =>
          [
            keyFields(res.api_key, res.secret),
            '',
            'The secret is shown only now: store it safely, it cannot be shown again.',
            'Use it with: CLOUD_API_KEY=<secret> cloud <command>',
          ].join('\n'),
        );
      });

    documented(keys.command('list'), {
      calls: ['apiKeysList'],
      examples: ['cloud api-keys list --page 2'],
    })
      .description('list the organization’s live API keys, newest first (secrets are never shown again)')
      .option('--page <n>', 'the page, from 1', positiveInteger)
      .option('--limit <n>', 'keys per page', positiveInteger)
      .action(async (o: { page?: number; limit?: number }) => {
        const res = await cli.client().apiKeys.list.query({
          ...(o.page !== undefined ? { page: o.page } : {}),
          ...(o.limit !== undefined ? { limit: o.limit } : {}),
        });
        cli.print(res, () => {
          const rows = table(res.api_keys, {
            id: (k) => k.id,
            name: (k) => k.name,
            prefix: (k) => k.prefix,
            permissions: (k) => k.permissions.join(','),
            expires: (k) => k.expires_at,
            'last used': (k) => k.last_used_at ?? 'never',
          });
          return res.has_more && res.page !== null
            ? `${rows}\n(${res.api_keys.length} of ${res.total}: next page with --page ${res.page + 1})`
            : rows;
        });
      });

    documented(keys.command('show'), {
      calls: ['apiKeysGet'],
      examples: ['cloud api-keys show key_abc123'],
    })
      .description('show an API key: its permissions, expiry and last use')
      .argument('<id>', 'the key id (key_…)')
      .action(async (id: string) => {
        const res = await cli.client().apiKeys.get.query({ id });
        cli.print(res, () => keyFields(res.api_key));
      });

    documented(keys.command('revoke'), {
      calls: ['apiKeysGet', 'apiKeysRevoke'],
      examples: ['cloud api-keys revoke key_abc123 --yes'],
    })
      .description('revoke an API key: it is refused from the next request on (asks first)')
      .argument('<id>', 'the key id (key_…)')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .action(async (id: string, o: { yes?: boolean }) => {
        const client = cli.client();
        // On a terminal, the key is shown (an unknown id fails here) before asking.
        await cli.confirm(
          async () => {
            const { api_key } = await client.apiKeys.get.query({ id });
            return `Revoke ${api_key.name} (${api_key.prefix}…)? Whatever uses it will be refused.`;
          },
          o.yes,
          'revoking an API key',
        );
        const res = await client.apiKeys.revoke.mutate({ id });
        cli.print(res, () => `Revoked ${id}.`);
      });
  },
});
