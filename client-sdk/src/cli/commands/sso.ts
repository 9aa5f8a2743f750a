import { readFileSync } from 'node:fs';
import { NotFoundError, type RouterInputs, type RouterOutputs } from '@cloud-platform/client';
import type { Command } from 'commander';
import type { Cli } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { ask, fields, readStdin, table } from '../output.js';

/**
 * The organization's single sign-on (docs/sso.md): `cloud organization sso show|set|delete` and
 * `cloud domains verify <domain>` (the TXT record of one of its email domains).
 */

type Sso = RouterOutputs['sso']['get']['sso'];
type SetInput = RouterInputs['sso']['set'];

interface SetOptions {
  protocol?: 'oidc' | 'saml';
  issuer?: string;
  clientId?: string;
  clientSecretStdin?: boolean;
  metadataFile?: string;
  idpEntityId?: string;
  idpSsoUrl?: string;
  idpCertificateFile?: string;
  domain: string[];
  defaultRole?: 'admin' | 'member';
  enforced?: boolean;
}

/** `--domain a.com --domain b.com` or `--domain a.com,b.com`. */
const collectDomains = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(',')
    .map((d) => d.trim())
    .filter(Boolean),
];

function readTextFile(path: string, option: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliError(`${option}: cannot read ${path} (${(err as Error).message})`, EXIT.USAGE);
  }
}

const NO_CONNECTION =
  'the organization has no single sign-on connection: set one up with `cloud organization sso set`';

function ssoFields(sso: Sso): string {
  const connection =
    sso.protocol === 'oidc'
      ? { issuer: sso.issuer, 'client id': sso.client_id, 'redirect uri': sso.redirect_uri }
      : {
          'idp entity id': sso.idp_entity_id,
          'idp sso url': sso.idp_sso_url,
          'idp certificate': sso.idp_certificate_fingerprint,
          'acs url': sso.acs_url,
          'entity id': sso.entity_id,
          'metadata url': sso.metadata_url,
        };
  const summary = fields({
    protocol: sso.protocol,
    ...connection,
    enforced: sso.enforced ? 'yes (password login only for the owner)' : 'no',
    'default role': sso.default_role,
    updated: sso.updated_at,
  });
  const domains = table(sso.domains, {
    domain: (d) => d.domain,
    status: (d) => d.verification.status,
    'txt record': (d) => d.verification.record.name,
    value: (d) => d.verification.record.value,
  });
  const pending = sso.domains.some((d) => d.verification.status === 'pending')
    ? '\nPublish each pending TXT record, then `cloud domains verify <domain>`.'
    : '';
  return `${summary}\n\nDomains:\n${domains}${pending}`;
}

/**
 * The body of `PUT /organization/sso` from the options; what they leave out of the protocol's required fields comes
 * from the current connection (`current`), so that `set --enforced` alone works on an OIDC connection.
 */
async function setInput(o: SetOptions, current: Sso | undefined): Promise<SetInput> {
  const saml = o.metadataFile ?? o.idpEntityId ?? o.idpSsoUrl ?? o.idpCertificateFile;
  const oidc = o.issuer ?? o.clientId ?? o.clientSecretStdin;
  if (saml !== undefined && oidc !== undefined) {
    throw new CliError(
      'give the options of one protocol: OIDC (--issuer …) or SAML (--metadata-file …)',
      EXIT.USAGE,
    );
  }
  const protocol =
    o.protocol ?? (saml !== undefined ? 'saml' : oidc !== undefined ? 'oidc' : current?.protocol);
  if (!protocol) throw new CliError('no connection yet: give --protocol oidc or --protocol saml', EXIT.USAGE);
  const common = {
    ...(o.domain.length > 0 ? { domains: o.domain } : {}),
    ...(o.defaultRole ? { default_role: o.defaultRole } : {}),
    ...(o.enforced !== undefined ? { enforced: o.enforced } : {}),
  };
  const same = current?.protocol === protocol ? current : undefined;
  if (protocol === 'oidc') {
    const issuer = o.issuer ?? same?.issuer ?? undefined;
    const clientId = o.clientId ?? same?.client_id ?? undefined;
    if (!issuer || !clientId)
      throw new CliError('an OIDC connection needs --issuer and --client-id', EXIT.USAGE);
    let secret: string | undefined;
    if (o.clientSecretStdin) secret = await readStdin();
    else if (!same) {
      // A new OIDC connection needs its secret: asked without echo on a terminal, never on the command line.
      if (!process.stdin.isTTY)
        throw new CliError(
          'no client secret: give it on standard input with --client-secret-stdin',
          EXIT.USAGE,
        );
      secret = await ask('Client secret: ', { hidden: true });
    }
    if (secret === '') throw new CliError('the client secret on standard input is empty', EXIT.USAGE);
    return {
      protocol,
      issuer,
      client_id: clientId,
      ...(secret !== undefined ? { client_secret: secret } : {}),
      ...common,
    };
  }
  if (o.metadataFile) {
    return { protocol, metadata_xml: readTextFile(o.metadataFile, '--metadata-file'), ...common };
  }
  if (!o.idpEntityId || !o.idpSsoUrl || !o.idpCertificateFile) {
    throw new CliError(
      'a SAML connection needs --metadata-file, or --idp-entity-id, --idp-sso-url and --idp-certificate-file',
      EXIT.USAGE,
    );
  }
  return {
    protocol,
    idp_entity_id: o.idpEntityId,
    idp_sso_url: o.idpSsoUrl,
    idp_certificate: readTextFile(o.idpCertificateFile, '--idp-certificate-file'),
    ...common,
  };
}

/** The connection, or undefined when there is none (404). */
async function currentConnection(cli: Cli): Promise<Sso | undefined> {
  try {
    return (await cli.client().sso.get.query()).sso;
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/** `cloud organization sso …`, under the `organization` command. */
export function registerOrganizationSso(organization: Command, cli: Cli): void {
  const sso = organization
    .command('sso')
    .description('single sign-on through your identity provider (OIDC or SAML; Enterprise plan)');

  documented(sso.command('show'), {
    calls: ['ssoGet'],
    examples: ['cloud organization sso show'],
  })
    .description(
      'show the connection, its domains and their TXT records, and the values the IdP needs (owner, admin)',
    )
    .action(async () => {
      const current = await currentConnection(cli);
      if (!current) throw new CliError(NO_CONNECTION, EXIT.NOT_FOUND);
      cli.print({ success: true, sso: current }, () => ssoFields(current));
    });

  documented(sso.command('set'), {
    calls: ['ssoGet', 'ssoSet'],
    examples: [
      'cloud organization sso set --issuer https://acme.okta.com --client-id 0oa1b2c3 --client-secret-stdin --domain acme.com < secret.txt',
      'cloud organization sso set --metadata-file idp-metadata.xml --domain acme.com',
      'cloud organization sso set --enforced',
    ],
  })
    .description(
      'create or change the connection (owner): what is left out stays as it is; --domain replaces the list of domains',
    )
    .option('--protocol <protocol>', 'oidc or saml (default: from the options given, else the current one)')
    .option('--issuer <url>', 'OIDC: the issuer URL (https://)')
    .option('--client-id <id>', 'OIDC: the client id the IdP gave')
    .option(
      '--client-secret-stdin',
      'OIDC: read the client secret from standard input (asked when creating the connection on a terminal)',
    )
    .option('--metadata-file <path>', 'SAML: the IdP’s metadata XML')
    .option('--idp-entity-id <id>', 'SAML without metadata: the IdP’s entity ID')
    .option('--idp-sso-url <url>', 'SAML without metadata: the IdP’s sign-on URL (HTTP-Redirect binding)')
    .option('--idp-certificate-file <path>', 'SAML without metadata: the IdP’s signing certificate (PEM)')
    .option(
      '--domain <domain>',
      'an email domain signed in through it (repeatable or comma-separated)',
      collectDomains,
      [],
    )
    .option('--default-role <role>', 'the role of a user made at a first sign-in: member or admin')
    .option(
      '--enforced',
      'only the identity provider signs the organization’s users in (the owner keeps a password)',
    )
    .option('--no-enforced', 'passwords work again beside the identity provider')
    .action(async (o: SetOptions) => {
      if (o.protocol !== undefined && o.protocol !== 'oidc' && o.protocol !== 'saml')
        throw new CliError(`--protocol: oidc or saml, not ${String(o.protocol)}`, EXIT.USAGE);
      const input = await setInput(o, await currentConnection(cli));
      const res = await cli.client().sso.set.mutate(input);
      cli.print(
        res,
        () => `Saved the ${res.sso.protocol.toUpperCase()} connection.\n\n${ssoFields(res.sso)}`,
      );
    });

  documented(sso.command('delete'), {
    calls: ['ssoDelete'],
    examples: ['cloud organization sso delete --yes'],
  })
    .description('remove the connection and its domains; enforcement ends with it (owner; asks first)')
    .option('--yes', 'do not ask (required when not on a terminal)')
    .action(async (o: { yes?: boolean }) => {
      await cli.confirm(
        'Remove the single sign-on connection and its domains? Users it created have no password to sign in with.',
        o.yes,
        'removing the single sign-on connection',
      );
      const res = await cli.client().sso.delete.mutate({});
      cli.print(res, () => res.message);
    });
}

/** `cloud domains verify <domain>`: an email domain of the single sign-on connection, by its TXT record. */
export default defineCommandGroup({
  name: 'domains',
  register(program, cli) {
    const domains = program
      .command('domains')
      .description(
        'the email domains of your single sign-on connection (`cloud organization sso show` lists them)',
      );

    documented(domains.command('verify'), {
      calls: ['ssoVerifyDomain'],
      examples: ['cloud domains verify acme.com'],
    })
      .description('verify an email domain of the single sign-on connection by its TXT record (owner)')
      .argument('<domain>', 'a domain of the connection, such as acme.com')
      .action(async (domain: string) => {
        const res = await cli.client().sso.verifyDomain.mutate({ domain: domain.toLowerCase() });
        cli.print(
          res,
          () =>
            `${domain.toLowerCase()} is verified: sign-ins of its addresses go through the identity provider.`,
        );
      });
  },
});
