import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../db/base.entity.js';
import { PLAN_IDS } from '../lib/plans.js';

export const OrganizationSchema = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  extends: BaseSchema,
  properties: {
    name: p.string().length(200),
    plan: p.enum(PLAN_IDS).default('starter'),
  },
});

export class Organization extends OrganizationSchema.class {}
OrganizationSchema.setClass(Organization);
