import type { RouterOutputs } from '@cloud-platform/client';
import { defineCommandGroup, documented } from '../command-group.js';
import { credentialsFile, loadCredentials, removeCredentials } from '../credentials.js';
import { CliError, EXIT } from '../exit-codes.js';
import { ask, fields } from '../output.js';
import { registerOrganizationSso } from './sso.js';
import { registerOrganizationSecurity } from './organization-security.js';

type Organization = RouterOutputs['organization']['get']['organization'];

const organizationFields = (o: Organization) =>
  fields({
    id: o.id,
    name: o.name,
    plan: o.plan,
    owner: o.owner_id,
    users: o.users_count,
    created: o.created_at,
  });

interface DeleteOptions {
  confirm?: string;
  yes?: boolean;
  passwordStdin?: boolean;
}

export default defineCommandGroup({
  name: 'organization',
  register(program, cli) {
    const organization = program
      .command('organization')
      .description(
        'your organization: its name, its owner, its single sign-on and SCIM provisioning, and deleting it',
      );

    documented(organization.command('show'), {
      calls: ['organizationGet'],
      examples: ['cloud organization show'],
    })
      .description('show the organization: name, plan, owner and number of users')
      .action(async () => {
        const res = await cli.client().organization.get.query();
        cli.print(res, () => organizationFields(res.organization));
      });

    documented(organization.command('rename'), {
      calls: ['organizationUpdate'],
      examples: ["cloud organization rename 'Acme Labs'"],
    })
      .description('rename the organization (owner, admin)')
      .argument('<name>', 'the new name, 1 to 200 characters')
      .action(async (name: string) => {
        const res = await cli.client().organization.update.mutate({ name });
        cli.print(res, () => `Renamed the organization: ${res.organization.name}`);
      });

    documented(organization.command('transfer-ownership'), {
      calls: ['organizationTransferOwnership'],
      examples: ['cloud organization transfer-ownership usr_abc123'],
    })
      .description('make an active admin the owner; you become an admin (owner; asks for your password)')
      .argument('<user_id>', 'the new owner (usr_…), an active admin of the organization')
      .option('--password-stdin', 'read your password from standard input instead of asking')
      .action(async (userId: string, o: { passwordStdin?: boolean }) => {
        const client = cli.client();
        const password = await cli.password(o.passwordStdin, 'Your password: ');
        const res = await client.organization.transferOwnership.mutate({ user_id: userId, password });
        cli.print(
          res,
          () => `${res.organization.owner_id} now owns ${res.organization.name}; you are an admin of it.`,
        );
      });

    registerOrganizationSso(organization, cli);
    registerOrganizationSecurity(organization, cli);

    documented(organization.command('scim-token'), {
      calls: ['ssoScimToken'],
      examples: ['cloud organization scim-token', 'cloud organization scim-token --json'],
    })
      .description(
        'make the token of SCIM provisioning for the identity provider, shown once; the previous one stops working (owner)',
      )
      .action(async () => {
        const res = await cli.client().sso.scimToken.mutate();
        cli.print(res, () =>
          [
            fields({ base_url: res.scim.base_url, token: res.scim.token, created: res.scim.created_at }),
            'Give the base URL and the token to the identity provider now: the token is not shown again. ' +
              'See docs/sso.md, "SCIM provisioning".',
          ].join('\n'),
        );
      });

    documented(organization.command('delete'), {
      calls: ['organizationGet', 'organizationDelete'],
      examples: [
        'cloud organization delete',
        "cloud organization delete --confirm 'Acme Labs' --yes --password-stdin < password.txt",
      ],
    })
      .description(
        'delete the organization and everything in it, for good (owner): type its name to confirm, and your password',
      )
      .option('--confirm <name>', 'the organization’s exact name (with --yes: no question asked)')
      .option('--yes', 'do not ask (with --confirm; required when not on a terminal)')
      .option('--password-stdin', 'read your password from standard input instead of asking')
      .action(async (o: DeleteOptions) => {
        const client = cli.client();
        let confirm = o.yes ? o.confirm : undefined;
        if (confirm === undefined) {
          if (!process.stdin.isTTY) {
            throw new CliError(
              'deleting the organization needs a confirmation: pass --confirm <its exact name> --yes',
              EXIT.USAGE,
            );
          }
          const { organization: current } = await client.organization.get.query();
          cli.note(
            `This deletes ${current.name} (${current.id}) and everything in it: ${current.users_count} user(s), ` +
              'VPN connections, sites, databases and their backups, invoices, webhooks and the audit log. ' +
              'The subscription is canceled and a final invoice charges what is unbilled. It cannot be undone.',
          );
          confirm = await ask(`Type the organization’s name (${current.name}) to delete it: `);
          if (confirm !== current.name) throw new CliError('the name does not match: nothing was deleted');
        }
        const password = await cli.password(o.passwordStdin, 'Your password: ');
        const res = await client.organization.delete.mutate({ confirm, password });
        // Every session and API key of the organization is refused from now on: the stored login is useless.
        const file = credentialsFile(cli.env);
        const signedOut = loadCredentials(file) !== undefined;
        if (signedOut) removeCredentials(file);
        cli.print({ ...res, signed_out: signedOut }, () =>
          [
            `Deleted ${res.id}: everything in it is removed by ${res.deletion_scheduled}.`,
            signedOut
              ? `Its sessions and API keys are refused from now on, so the stored credentials were removed (${file}).`
              : '',
          ]
            .filter(Boolean)
            .join('\n'),
        );
      });
  },
});
