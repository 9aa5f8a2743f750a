import { z } from 'zod';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, zPathId, zUserIdFilter } from '../../lib/schema.js';
import { DOMAIN_VERIFICATION_PREFIX, domainProblem } from '../../lib/domain-verification.js';
import {
  DEFAULT_LOG_LIMIT,
  BUILDERS,
  DEPLOYMENT_STATUSES,
  FRAMEWORKS,
  LIMITS,
  LOG_STREAMS,
  MAX_LOG_LIMIT,
  NODE_VERSIONS,
  SITE_STATUSES,
} from './hosting.constants.js';

const utf8Bytes = (s: string) => Buffer.byteLength(s, 'utf8');

// ---------- field rules ----------

// The rule of a claimable domain (server/lib/domain-verification.ts), which the edge applies to Host headers too.
export { domainProblem };

const ZDomain = z
  .string()
  .superRefine((v, ctx) => {
    const problem = domainProblem(v);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    'Custom domain: a lower-case host name of at least two labels, at most 253 characters. It is served once ' +
      'verified (`domain_verification`, `POST /hosting/sites/{id}/domain/verify`); a domain another site has ' +
      'verified → 409 `CONFLICT`, while pending claims of other sites do not block it.',
  );

/** Git's rules for a branch name, in short: no spaces or control characters, no `..`, not starting with `-`. */
const ZBranch = z
  .string()
  .trim()
  .min(1)
  .max(LIMITS.branchLength)
  .refine(
    (b) =>
      /^[A-Za-z0-9._/-]+$/.test(b) &&
      !b.startsWith('-') &&
      !b.startsWith('/') &&
      !b.endsWith('/') &&
      !b.endsWith('.') &&
      !b.endsWith('.lock') &&
      !b.includes('..') &&
      !b.includes('//'),
    'must be a valid Git branch name (letters, digits, `.`, `_`, `-`, `/`)',
  );

const ZGitRepo = z
  .string()
  .trim()
  .min(1)
  .max(LIMITS.gitRepoLength)
  .describe(
    'HTTPS URL of the Git repository, without credentials. Only hosts that are and resolve to global unicast ' +
      'addresses are accepted, as for webhook URLs: loopback, private, link-local, CGNAT, multicast, reserved or ' +
      'cloud metadata addresses and IPv6 forms that carry one are refused (checked again by every build).',
  );

const ZName = z
  .string()
  .trim()
  .min(1)
  .max(LIMITS.nameLength)
  .describe('Display name, 1 to 100 characters; the site address is made from it');

const ZBuildCommand = z
  .string()
  .trim()
  .min(1)
  .max(LIMITS.buildCommandLength)
  .describe(
    'Command that builds the site (default by framework). The simulated builder fails a build whose command ' +
      'contains `exit 1`.',
  );

const ZOutputDirectory = z
  .string()
  .trim()
  .min(1)
  .max(LIMITS.outputDirectoryLength)
  .refine(
    (d) => !d.startsWith('/') && !d.split('/').includes('..') && !/[\\\0]/.test(d),
    'must be a relative path inside the repository',
  )
  .describe('Directory the build writes the site to, relative to the repository (default by framework)');

const ZNodeVersion = z.enum(NODE_VERSIONS).describe('Node.js major version of the build: `18`, `20` or `22`');

export const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

const ZEnvironmentVariables = z
  .record(z.string(), z.string())
  .superRefine((vars, ctx) => {
    const names = Object.keys(vars);
    if (names.length > LIMITS.envNames) {
      ctx.addIssue({ code: 'custom', message: `at most ${LIMITS.envNames} variables` });
    }
    let total = 0;
    for (const name of names) {
      const value = vars[name]!;
      total += utf8Bytes(name) + utf8Bytes(value);
      if (name.length > LIMITS.envNameLength) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: `names are at most ${LIMITS.envNameLength} characters`,
        });
      } else if (!ENV_NAME.test(name)) {
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: 'names are upper-case letters, digits and `_`, not starting with a digit',
        });
      }
      if (utf8Bytes(value) > LIMITS.envValueBytes) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'values are at most 4 KiB' });
      }
    }
    if (total > LIMITS.envTotalBytes) {
      ctx.addIssue({ code: 'custom', message: 'names and values are at most 64 KiB in all' });
    }
  })
  .describe(
    'Name → value, injected into the build. They become part of the public bundle of client-side builds: no ' +
      'secrets. Names match `^[A-Z_][A-Z0-9_]*$` (at most 128 characters), at most 100 names, values at most ' +
      '4 KiB, 64 KiB in all.',
  );

const ZSiteId = zPathId('site', 'Site');
const ZDeploymentId = zPathId('dep', 'Deployment');

// ---------- inputs ----------

export const ZListSitesInput = z
  .object({
    ...pageQueryShape,
    status: z.enum(SITE_STATUSES).optional().describe('Only sites in this state'),
    framework: z.enum(FRAMEWORKS).optional().describe('Only sites of this framework'),
    user_id: zUserIdFilter(
      'Owners and admins: only the sites of this user (`usr_…`). Members always see their own sites only; ' +
        'naming anyone else gives an empty list.',
    ),
  })
  .prefault({});
export type TListSitesInput = z.infer<typeof ZListSitesInput>;

export const ZCreateSiteInput = z.strictObject({
  name: ZName,
  git_repo: ZGitRepo,
  framework: z.enum(FRAMEWORKS).describe('`react`, `nextjs`, `vue` or `angular`'),
  domain: ZDomain.nullable().optional(),
  branch: ZBranch.optional().describe('Branch deployed by default (default `main`)'),
  build_command: ZBuildCommand.optional(),
  output_directory: ZOutputDirectory.optional(),
  node_version: ZNodeVersion.optional(),
  environment_variables: ZEnvironmentVariables.optional(),
});
export type TCreateSiteInput = z.infer<typeof ZCreateSiteInput>;

export const ZSiteIdInput = z.object({ id: ZSiteId });
export type TSiteIdInput = z.infer<typeof ZSiteIdInput>;

export const ZVerifyDomainInput = z.strictObject({ id: ZSiteId });
export type TVerifyDomainInput = z.infer<typeof ZVerifyDomainInput>;

export const ZUpdateSiteInput = z.strictObject({
  id: ZSiteId,
  name: ZName.optional().describe('New display name (the site address stays the same)'),
  domain: ZDomain.nullable().optional().describe('New custom domain; `null` removes it'),
  git_repo: ZGitRepo.optional(),
  branch: ZBranch.optional().describe('Branch deployed by default'),
  framework: z.enum(FRAMEWORKS).optional(),
  build_command: ZBuildCommand.optional(),
  output_directory: ZOutputDirectory.optional(),
  node_version: ZNodeVersion.optional(),
  environment_variables: ZEnvironmentVariables.optional().describe(
    'Replaces every variable of the site (send the whole set); `{}` removes them all',
  ),
});
export type TUpdateSiteInput = z.infer<typeof ZUpdateSiteInput>;

export const ZDeployInput = z.strictObject({
  id: ZSiteId,
  branch: ZBranch.optional().describe("Branch to build (default: the site's branch)"),
  message: z
    .string()
    .trim()
    .max(LIMITS.messageLength)
    .nullable()
    .optional()
    .describe('What this deployment is about, up to 500 characters'),
  commit: z
    .string()
    .max(40, 'must be a Git commit SHA: 7 to 40 hexadecimal characters')
    .regex(/^[0-9a-fA-F]{7,40}$/, 'must be a Git commit SHA: 7 to 40 hexadecimal characters')
    .transform((c) => c.toLowerCase())
    .optional()
    .describe('Commit to build, 7 to 40 hex characters (default: a generated one standing for the head)'),
});
export type TDeployInput = z.infer<typeof ZDeployInput>;

export const ZListDeploymentsInput = z.object({
  id: ZSiteId,
  ...pageQueryShape,
  status: z.enum(DEPLOYMENT_STATUSES).optional().describe('Only deployments in this state'),
});
export type TListDeploymentsInput = z.infer<typeof ZListDeploymentsInput>;

export const ZDeploymentIdInput = z.object({ id: ZSiteId, deployment_id: ZDeploymentId });
export type TDeploymentIdInput = z.infer<typeof ZDeploymentIdInput>;

export const ZCancelDeploymentInput = z.strictObject({ id: ZSiteId, deployment_id: ZDeploymentId });
export type TCancelDeploymentInput = z.infer<typeof ZCancelDeploymentInput>;

export const ZRollbackInput = z.strictObject({
  id: ZSiteId,
  deployment_id: z
    .string()
    .min(1)
    .max(64)
    .describe('A `success` deployment of this site (`dep_…`) other than the live one'),
});
export type TRollbackInput = z.infer<typeof ZRollbackInput>;

export const ZLogsInput = z.object({
  id: ZSiteId,
  deployment_id: ZDeploymentId,
  after: z.coerce
    .number()
    .int()
    .min(0)
    .max(2_147_483_647)
    .default(0)
    .describe('Lines after this `seq` (default 0: from the first line)'),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_LOG_LIMIT)
    .default(DEFAULT_LOG_LIMIT)
    .describe(
      `Lines at most, 1 to ${MAX_LOG_LIMIT} (default ${DEFAULT_LOG_LIMIT}); ignored by event streams`,
    ),
});
export type TLogsInput = z.infer<typeof ZLogsInput>;

// ---------- outputs ----------

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');
const ZNullableTimestamp = z.string().nullable().describe('ISO 8601 UTC with milliseconds, or null');

export const ZDomainVerification = z
  .object({
    status: z
      .enum(['pending', 'verified'])
      .describe(
        '`pending`: not served yet, publish `record` and verify; `verified`: the edge serves the domain',
      ),
    record: z
      .object({
        type: z.literal('TXT'),
        name: z.string().describe(`\`${DOMAIN_VERIFICATION_PREFIX}.<domain>\``),
        value: z.string().describe('The value to publish: random, made anew whenever the domain changes'),
      })
      .describe('The DNS record that proves the domain is yours'),
  })
  .nullable()
  .meta({ id: 'HostingDomainVerification' })
  .describe(
    'Whether the custom domain is verified, and the TXT record that verifies it; null without a domain',
  );

const siteFields = {
  id: z.string().describe('`site_…`'),
  name: z.string(),
  domain: z
    .string()
    .nullable()
    .describe('Custom domain, or null; served only once verified (`domain_verification`)'),
  domain_verification: ZDomainVerification,
  status: z.enum(SITE_STATUSES),
  ssl_enabled: z.boolean().describe('Served over HTTPS (always true: certificates are managed)'),
  region: z.literal('global').describe('Sites are served from every edge location'),
  framework: z.enum(FRAMEWORKS),
  url: z.string().describe('`https://<slug>.<SITES_DOMAIN>`: the address of the live deployment'),
  preview_url: z
    .string()
    .nullable()
    .describe(
      'Address of the newest successful deployment, `https://<slug>-<short id>.<SITES_DOMAIN>`; null before it',
    ),
  git_repo: z.string(),
  branch: z.string().describe('Branch deployed by default'),
  user_id: z.string().describe('Owner of the site, `usr_…`'),
  live_deployment_id: z.string().nullable().describe('The deployment the site serves (`dep_…`), or null'),
  last_deployment: ZNullableTimestamp.describe('`completed_at` of the live deployment, or null'),
  created_at: ZTimestamp,
  updated_at: ZTimestamp,
};

export const ZSite = z.object(siteFields).meta({ id: 'HostingSite' });
export type TSite = z.infer<typeof ZSite>;

export const ZSiteDetail = z
  .object({
    ...siteFields,
    build_settings: z.object({
      build_command: z.string(),
      output_directory: z.string(),
      node_version: z.enum(NODE_VERSIONS),
    }),
    environment_variables: z.record(z.string(), z.string()),
    metrics: z
      .object({
        requests_24h: z.number().int().describe('Requests served in the last 24 hours'),
        bandwidth_24h: z.string().describe('Bytes served in the last 24 hours, human readable (`1.24 GB`)'),
        uptime: z
          .string()
          .describe('Share of the last 24 hours the site answered (`99.98%`); `0%` before anything is live'),
      })
      .describe(
        'Traffic of the last 24 hours: what the edge served for sites built for real (`BUILDER=local`, docs/hosting.md), simulated otherwise (docs/sites.md, "Sites and deployments")',
      ),
  })
  .meta({ id: 'HostingSiteDetail' });
export type TSiteDetail = z.infer<typeof ZSiteDetail>;

export const ZDeployment = z
  .object({
    id: z.string().describe('`dep_…`'),
    site_id: z.string().describe('The site, `site_…`'),
    status: z
      .enum(DEPLOYMENT_STATUSES)
      .describe('`queued` → `building` → `success` | `failed`; `canceled` when canceled before it ended'),
    branch: z.string(),
    commit: z
      .string()
      .describe(
        'Commit SHA built (7 to 40 hex characters). A real build of a branch records the head it fetched once the fetch is done',
      ),
    message: z.string().nullable(),
    builder: z
      .enum(BUILDERS)
      .describe(
        'Which builder built it (`BUILDER`): `simulated` (the test mode, nothing is fetched or served) or `local` (a real build on the platform, served by the edge; docs/hosting.md)',
      ),
    status_message: z.string().nullable().describe('Why the build failed or was canceled; null otherwise'),
    url: z
      .string()
      .nullable()
      .describe('Address of this deployment (`https://<slug>-<short id>.<SITES_DOMAIN>`) once it succeeded'),
    live: z.boolean().describe('Whether the site serves this deployment now'),
    created_at: ZTimestamp,
    started_at: ZNullableTimestamp.describe('When the build started; null while queued'),
    completed_at: ZNullableTimestamp.describe('When it succeeded, failed or was canceled'),
    duration: z
      .string()
      .nullable()
      .describe('Build time from `started_at` to `completed_at`, human readable (`1m 12s`); null until then'),
  })
  .meta({ id: 'HostingDeployment' });
export type TDeployment = z.infer<typeof ZDeployment>;

export const ZLogLine = z
  .object({
    seq: z.number().int().describe('Line number within the deployment, from 1'),
    timestamp: ZTimestamp,
    stream: z.enum(LOG_STREAMS),
    message: z.string(),
  })
  .meta({ id: 'HostingLogLine' });
export type TLogLine = z.infer<typeof ZLogLine>;

export const ZListSitesOutput = pageResponse('sites', ZSite);
export type TListSitesOutput = z.infer<typeof ZListSitesOutput>;

export const ZSiteOutput = okResponse({ site: ZSiteDetail });
export type TSiteOutput = z.infer<typeof ZSiteOutput>;

export const ZDeleteSiteOutput = okResponse({
  message: z.string(),
  id: z.string().describe('The deleted site'),
  domain: z.string().nullable().describe('Its custom domain, free again; null if it had none'),
});
export type TDeleteSiteOutput = z.infer<typeof ZDeleteSiteOutput>;

export const ZDeploymentOutput = okResponse({ deployment: ZDeployment });
export type TDeploymentOutput = z.infer<typeof ZDeploymentOutput>;

export const ZListDeploymentsOutput = pageResponse('deployments', ZDeployment);
export type TListDeploymentsOutput = z.infer<typeof ZListDeploymentsOutput>;

export const ZLogsOutput = okResponse({
  logs: z.array(ZLogLine),
  has_more: z.boolean().describe('More lines are stored after the last one returned'),
  status: z.enum(DEPLOYMENT_STATUSES).describe('The deployment status when the lines were read'),
});
export type TLogsOutput = z.infer<typeof ZLogsOutput>;
