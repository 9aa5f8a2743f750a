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
  },
});

export class Organization extends OrganizationSchema.class {}
OrganizationSchema.setClass(Organization);
