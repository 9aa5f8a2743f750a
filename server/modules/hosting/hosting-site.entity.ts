import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { FRAMEWORKS, NODE_VERSIONS, SITE_STATUSES } from './hosting.constants.js';
import type { StoredEnvironment } from './site-environment.js';

/**
 * A site deployed from a Git repository. Its own address is `https://<slug>.<SITES_DOMAIN>`; `domain` is an optional
 * custom domain, served and unique across every organization once verified (docs/sites.md, "Custom domains"). The build queue of the site is serialised on this row (see
 * builds.service.ts): `buildTicket` names the one job chain allowed to move its builds on.
 */
export const HostingSiteSchema = defineEntity({
  name: 'HostingSite',
  tableName: 'hosting_sites',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'hosting_sites_filter_index',
      expression:
        'create index "hosting_sites_filter_index" on "hosting_sites" ("organization_id", "status", "framework", "created_at" desc, "id" desc)',
    },
    {
      name: 'hosting_sites_owner_filter_index',
      expression:
        'create index "hosting_sites_owner_filter_index" on "hosting_sites" ("organization_id", "user_id", "status", "framework", "created_at" desc, "id" desc)',
    },
    // A user's sites and an organization's, newest first (the list's two scopes).
    {
      name: 'hosting_sites_owner_index',
      expression:
        'create index "hosting_sites_owner_index" on "hosting_sites" ("organization_id", "user_id", "created_at" desc, "id" desc)',
    },
    {
      name: 'hosting_sites_organization_index',
      expression:
        'create index "hosting_sites_organization_index" on "hosting_sites" ("organization_id", "created_at" desc, "id" desc)',
    },
    // The sites claiming a domain, verified or not (a create or a change looks for a verified one among them).
    { name: 'hosting_sites_domain_index', properties: ['domain'] },
  ],
  uniques: [
    { name: 'hosting_sites_slug_unique', properties: ['slug'] },
    // A verified custom domain belongs to one site of the whole platform (pending claims do not count); deleting the
    // site, or changing its domain, frees it. The edge finds a verified domain's site through it.
    {
      name: 'hosting_sites_verified_domain_unique',
      expression:
        'create unique index "hosting_sites_verified_domain_unique" on "hosting_sites" ("domain") where "domain_verified_at" is not null',
    },
  ],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    /** The owner: the user who created it (or received it when that user was deleted). */
    user: () => p.manyToOne(User).index(),
    name: p.string().length(100),
    /** Label of the site's own address; unique across every organization, kept when the site is renamed. */
    slug: p.string().length(63),
    /** Custom domain: served, and unique across every organization, once verified (`domainVerifiedAt`). */
    domain: p.string().length(253).nullable(),
    /** The TXT value that proves the domain is the site owner's: random, made anew whenever `domain` changes. */
    domainVerificationToken: p.string().length(64).nullable(),
    /** When the TXT record was found (the domain is served from then on); null while pending. */
    domainVerifiedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    gitRepo: p.string().length(2048),
    branch: p.string().length(255),
    framework: p.enum(FRAMEWORKS),
    buildCommand: p.string().length(1000),
    outputDirectory: p.string().length(255),
    nodeVersion: p.enum(NODE_VERSIONS),
    /**
     * Name → value, in the order given, encrypted as one string (site-environment.ts); a set written before
     * encryption at rest is still the object in clear until rewritten. `json` (not `jsonb`) keeps the order.
     */
    environmentVariables: p.json<StoredEnvironment>().columnType('json').lazy(),
    status: p.enum(SITE_STATUSES).default('active'),
    sslEnabled: p.boolean().default(true),
    /** The deployment the site serves: the newest success, or the one a rollback chose. */
    liveDeploymentId: p.string().length(64).nullable(),
    /** `completed_at` of the live deployment (the site's `last_deployment`). */
    liveDeploymentAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** The newest successful deployment (the site's `preview_url`). */
    previewDeploymentId: p.string().length(64).nullable(),
    /** When a deployment first went live: the simulated traffic starts then (hosting.simulation.ts). */
    liveSince: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Bumped whenever a build job is queued for this site: only the job carrying the current value acts. */
    buildTicket: p.integer().default(0),
  },
});

export class HostingSite extends HostingSiteSchema.class {}
HostingSiteSchema.setClass(HostingSite);
