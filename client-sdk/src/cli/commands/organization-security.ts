import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import type { Command } from 'commander';
import type { Cli } from '../cli.js';
import { documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields } from '../output.js';

/**
 * The organization's security policy (docs/organization.md, "Security policies"): `cloud organization security
 * show|set`.
 */

type Security = RouterOutputs['organization']['security']['get']['security'];
type SetInput = RouterInputs['organization']['security']['set'];

interface SetOptions {
  requireTwoFactor?: boolean;
  allow: string[];
  anyAddress?: boolean;
  sessionMaxAge?: string;
}

/** `--allow a --allow b` or `--allow a,b`. */
const collectRanges = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(',')
    .map((r) => r.trim())
    .filter(Boolean),
];

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3_600, d: 86_400 };

/** `--session-max-age`: `12h`, `7d`, `90m`, a number of seconds, or `default` (the server's setting). */
export function parseSessionMaxAge(text: string): number | null {
  const value = text.trim().toLowerCase();
  if (value === 'default' || value === 'none') return null;
  const m = /^(\d+)([smhd]?)$/.exec(value);
  if (!m) {
    throw new CliError(
      `--session-max-age: a duration such as 12h, 7d or 3600 (seconds), or default; not ${text}`,
      EXIT.USAGE,
    );
  }
  return Number(m[1]) * UNIT_SECONDS[m[2] || 's']!;
}

/** Seconds as the largest whole unit (`7d`, `12h`), else seconds. */
function durationText(seconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
  ] as const) {
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

function securityFields(security: Security): string {
  return fields({
    'two-factor required': security.require_two_factor ? 'yes (users signed in through SSO excepted)' : 'no',
    'allowed addresses':
      security.allowed_ip_ranges.length === 0 ? 'any' : security.allowed_ip_ranges.join(', '),
    'session max age':
      security.session_max_age === null
        ? 'the server’s setting'
        : `${durationText(security.session_max_age)} after sign-in`,
  });
}

/** The body of `PUT /organization/security` from the options: what they leave out stays as it is. */
function setInput(o: SetOptions): SetInput {
  if (o.anyAddress && o.allow.length > 0)
    throw new CliError('give either --allow or --any-address, not both', EXIT.USAGE);
  const input: SetInput = {
    ...(o.requireTwoFactor !== undefined ? { require_two_factor: o.requireTwoFactor } : {}),
    ...(o.anyAddress ? { allowed_ip_ranges: [] } : o.allow.length > 0 ? { allowed_ip_ranges: o.allow } : {}),
    ...(o.sessionMaxAge !== undefined ? { session_max_age: parseSessionMaxAge(o.sessionMaxAge) } : {}),
  };
  if (Object.keys(input).length === 0) {
    throw new CliError(
      'nothing to change: give --require-two-factor, --allow, --any-address or --session-max-age',
      EXIT.USAGE,
    );
  }
  return input;
}

/** `cloud organization security …`, under the `organization` command. */
export function registerOrganizationSecurity(organization: Command, cli: Cli): void {
  const security = organization
    .command('security')
    .description(
      'the security policy: two-factor required, allowed addresses, session lifetime (Enterprise plan)',
    );

  documented(security.command('show'), {
    calls: ['organizationSecurityGet'],
    examples: ['cloud organization security show'],
  })
    .description('show the security policy (owner, admin)')
    .action(async () => {
      const res = await cli.client().organization.security.get.query();
      cli.print(res, () => securityFields(res.security));
    });

  documented(security.command('set'), {
    calls: ['organizationSecuritySet'],
    examples: [
      'cloud organization security set --require-two-factor',
      'cloud organization security set --allow 203.0.113.0/24 --allow 2001:db8::/32',
      'cloud organization security set --session-max-age 12h',
      'cloud organization security set --any-address --session-max-age default',
    ],
  })
    .description(
      'change the security policy (owner): what is left out stays as it is; --allow replaces the list of ranges',
    )
    .option(
      '--require-two-factor',
      'users without two-factor sign-in (not signed in through SSO) may only turn it on',
    )
    .option('--no-require-two-factor', 'two-factor sign-in is up to each user again')
    .option(
      '--allow <cidr>',
      'an address range the users and API keys may call from, IPv4 or IPv6 (repeatable or comma-separated; ' +
        'it must hold your own address)',
      collectRanges,
      [],
    )
    .option('--any-address', 'lift the address restriction (an empty list)')
    .option(
      '--session-max-age <duration>',
      'how long a sign-in lasts at most: 12h, 7d, seconds (1h to 365d), or default for the server’s setting',
    )
    .action(async (o: SetOptions) => {
      const res = await cli.client().organization.security.set.mutate(setInput(o));
      cli.print(res, () => `Saved the security policy.\n\n${securityFields(res.security)}`);
    });
}
