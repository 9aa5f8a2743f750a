import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';

export const USAGE_RECORD_KINDS = ['build', 'site'] as const;
export type UsageRecordKind = (typeof USAGE_RECORD_KINDS)[number];

/**
 * What an organization used, kept after the site it came from is deleted (a site's deployments go with it): the
 * time of each finished build (`build`, keyed by the deployment), and the time a deleted site was serving (`site`,
 * keyed by the site). Read by the usage report (hosting.usage.ts).
 */
export const HostingUsageRecordSchema = defineEntity({
  name: 'HostingUsageRecord',
  tableName: 'hosting_usage_records',
  indexes: [{ name: 'hosting_usage_records_period_index', properties: ['organization', 'endedAt'] }],
  properties: {
    /** The deployment (`build`) or the site (`site`). */
    resourceId: p.string().primary().length(64),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    kind: p.enum(USAGE_RECORD_KINDS),
    siteId: p.string().length(64),
    startedAt: p.datetime(3).columnType('timestamptz(3)'),
    endedAt: p.datetime(3).columnType('timestamptz(3)'),
  },
});

export class HostingUsageRecord extends HostingUsageRecordSchema.class {}
HostingUsageRecordSchema.setClass(HostingUsageRecord);
