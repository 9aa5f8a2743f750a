import { router } from '../../trpc/init.js';
import { authedProcedure, requireRole } from '../../trpc/procedures.js';
import { ZNoQuery } from '../../lib/schema.js';
import {
  ZDeleteOrganizationInput,
  ZDeleteOrganizationOutput,
  ZOrganizationOutput,
  ZTransferOwnershipInput,
  ZTransferOwnershipOutput,
  ZUpdateOrganizationInput,
} from './organization.schema.js';
import * as organization from './organization.service.js';
import { ZSecurityOutput, ZSetSecurityInput } from './security.schema.js';
import * as security from './security.service.js';

const tags = ['Organization'];

const SECURITY_402 =
  'The organization is not on the Enterprise plan (`details: [{resource: "advanced_security", limit: 0, current: 0}]`)';

export const organizationRouter = router({
  get: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/organization',
        tags,
        summary: 'Get the caller’s organization',
        description:
          'Any user of the organization. `owner_id` is its one owner; `users_count` counts invited, active and ' +
          'suspended users.',
      },
    })
    .input(ZNoQuery.optional())
    .output(ZOrganizationOutput)
    .query(({ ctx }) => organization.getOrganization(ctx)),

  update: requireRole('owner', 'admin')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/organization',
        tags,
        summary: 'Rename the organization',
        description:
          'Owner and admin. Changes the organization’s `name`; emits `organization.updated` when it changes.',
      },
    })
    .input(ZUpdateOrganizationInput)
    .output(ZOrganizationOutput)
    .mutation(({ ctx, input }) => organization.updateOrganization(ctx, input)),

  transferOwnership: requireRole('owner')
    .meta({
      openapi: {
        method: 'POST',
        path: '/organization/transfer-ownership',
        tags,
        summary: 'Hand ownership to an admin',
        description:
          'Owner only, with the owner’s `password`. In one transaction the named user, an `active` admin, becomes ' +
          'the owner and the caller an admin; each gets the default permissions of the new role, and ' +
          '`user.updated` is emitted for both, then `organization.updated`. Applies from each user’s next request. A user of the organization ' +
          'who is not an active admin → 409; an unknown id or another organization’s user → 404; a wrong password ' +
          '→ 401 `INVALID_CREDENTIALS`, counted by the login throttle of the owner’s email and address (after 10 ' +
          'failures, 429 `TOO_MANY_LOGIN_ATTEMPTS` for 15 minutes, even with the right password).',
      },
      errors: {
        INVALID_CREDENTIALS: 'Wrong password',
        NOT_FOUND: 'No such user in the organization',
        CONFLICT: 'The user is not an active admin of the organization',
        TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
      },
      // The password check (bcrypt) must not hold a transaction open.
      idempotency: 'after-commit',
    })
    .input(ZTransferOwnershipInput)
    .output(ZTransferOwnershipOutput)
    .mutation(({ ctx, input }) => organization.transferOwnership(ctx, input)),

  delete: requireRole('owner')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/organization',
        tags,
        summary: 'Delete the organization and everything in it',
        description:
          'Owner only. The JSON body names the organization (`confirm`, its exact name, else 400) and gives the ' +
          'owner’s `password` (wrong → 401 `INVALID_CREDENTIALS`, counted by the login throttle: after 10 ' +
          'failures, 429 `TOO_MANY_LOGIN_ATTEMPTS` for 15 minutes, even with the right one). From the 202 on, ' +
          'every access token, refresh ' +
          'token and API key of the organization is refused (401) on every server process, and nothing of it is ' +
          'readable; active VPN connections are disconnected (`vpn.disconnected`), the subscription is canceled ' +
          'and a final invoice charges what is unbilled; these events still reach the organization’s webhooks. A ' +
          'durable job then removes every row of the organization (users, resources, backups, invoices, ' +
          'deliveries, audit entries) by `deletion_scheduled`; then its users’ emails can register again.',
      },
      errors: {
        INVALID_CREDENTIALS: 'Wrong password',
        TOO_MANY_LOGIN_ATTEMPTS: 'Too many failed attempts (the login throttle); see `Retry-After`',
      },
      successStatus: 202,
      deleteWithBody: true,
    })
    .input(ZDeleteOrganizationInput)
    .output(ZDeleteOrganizationOutput)
    .mutation(({ ctx, input }) => organization.deleteOrganization(ctx, input)),

  // The security policy (docs/organization.md, "Security policies").
  security: router({
    get: requireRole('owner', 'admin')
      .meta({
        openapi: {
          method: 'GET',
          path: '/organization/security',
          tags,
          summary: 'Get the organization’s security policy',
          description:
            'Owner and admin, on the Enterprise plan: `require_two_factor`, `allowed_ip_ranges` and ' +
            '`session_max_age` as they apply to every request of the organization’s users (and, for the ' +
            'address ranges, of its API keys).',
        },
        errors: { PLAN_LIMIT_EXCEEDED: SECURITY_402 },
      })
      .input(ZNoQuery.optional())
      .output(ZSecurityOutput)
      .query(({ ctx }) => security.getSecurity(ctx)),

    set: requireRole('owner')
      .meta({
        openapi: {
          method: 'PUT',
          path: '/organization/security',
          tags,
          summary: 'Change the organization’s security policy',
          description:
            'Owner only, on the Enterprise plan. Fields left out keep their values; `allowed_ip_ranges` replaces ' +
            'the list (an empty list lifts the restriction). Applies from the next request, on every server ' +
            'process. A list that holds no range of the caller’s own address → 409 (it would shut the owner out). ' +
            'Emits `organization.updated` when something changed.',
        },
        errors: {
          PLAN_LIMIT_EXCEEDED: SECURITY_402,
          CONFLICT: '`allowed_ip_ranges` holds no range of the caller’s own address',
        },
      })
      .input(ZSetSecurityInput)
      .output(ZSecurityOutput)
      .mutation(({ ctx, input }) => security.setSecurity(ctx, input)),
  }),
});
