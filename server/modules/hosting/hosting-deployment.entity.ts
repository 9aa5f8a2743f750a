import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../../db/base.entity.js';
import { BUILDERS, DEPLOYMENT_STATUSES, FRAMEWORKS, NODE_VERSIONS } from './hosting.constants.js';
import { HostingSite } from './hosting-site.entity.js';

/**
 * One build of a site. The build settings are copied from the site when it is queued, so a later change of the site
 * applies to the next deployment, not to one already waiting.
 */
export const HostingDeploymentSchema = defineEntity({
  name: 'HostingDeployment',
  tableName: 'hosting_deployments',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'hosting_deployments_filter_index',
      expression:
        'create index "hosting_deployments_filter_index" on "hosting_deployments" ("site_id", "status", "created_at" desc, "id" desc)',
    },
    // A site's deployments, newest first.
    {
      name: 'hosting_deployments_site_id_index',
      expression:
        'create index "hosting_deployments_site_id_index" on "hosting_deployments" ("site_id", "created_at" desc, "id" desc)',
    },
    // Deployments not finished yet (the build queue, and what a restart resumes).
    {
      name: 'hosting_deployments_pending_index',
      properties: ['site'],
      where: { status: { $in: ['queued', 'building'] } },
    },
  ],
  properties: {
    site: () => p.manyToOne(HostingSite).deleteRule('cascade'),
    status: p.enum(DEPLOYMENT_STATUSES).default('queued'),
    branch: p.string().length(255),
    commit: p.string().length(40),
    message: p.string().length(500).nullable(),
    /** Why the build failed or was canceled, for humans. */
    statusMessage: p.string().length(500).nullable(),
    gitRepo: p.string().length(2048),
    framework: p.enum(FRAMEWORKS),
    buildCommand: p.string().length(1000),
    outputDirectory: p.string().length(255),
    nodeVersion: p.enum(NODE_VERSIONS),
    /** Which builder built it (`BUILDER`, docs/hosting.md). */
    builder: p.enum(BUILDERS).default('simulated'),
    /**
     * The commit was given by the caller (a real build fetches exactly it); otherwise the builder records the head
     * of the branch it fetched.
     */
    commitPinned: p.boolean().default(true),
    /** The next step of the builder to run while `building` (simulated-hosting.driver.ts). */
    buildStep: p.integer().default(0),
    /** The `seq` of the last log line written (lines count from 1). */
    logSeq: p.integer().default(0),
    startedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    completedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class HostingDeployment extends HostingDeploymentSchema.class {}
HostingDeploymentSchema.setClass(HostingDeployment);
