import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../db/base.entity.js';
import { PLAN_IDS, PLAN_STATUSES } from '../lib/plans.js';

export const OrganizationSchema = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  extends: BaseSchema,
  properties: {
    name: p.string().length(200),
    plan: p.enum(PLAN_IDS).default('starter'),
    /** The subscription's state, written by billing with the subscription (docs/billing.md, "Billing"). */
    planStatus: p.enum(PLAN_STATUSES).default('active'),
    /**
     * Set by `DELETE /organization` (docs/organization.md, "The organization"): from then on every credential of the organization
     * is refused (server/access/actor.ts), and a job removes its rows, this one last.
     */
    deletedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /**
     * The security policy (docs/organization.md, "Security policies"), set by `PUT /organization/security` and read
     * with the caller on every request (server/access/actor.ts, security-policy.ts): two-factor sign-in required of
     * its users, the address ranges its users and API keys may call from (canonical CIDR texts; empty: any), the
     * longest a login session lives after its sign-in in seconds (null: the server's `SESSION_MAX_AGE`).
     */
    requireTwoFactor: p.boolean().default(false),
    allowedIpRanges: p.array().default([]),
    sessionMaxAge: p.integer().nullable(),
  },
});

export class Organization extends OrganizationSchema.class {}
OrganizationSchema.setClass(Organization);
