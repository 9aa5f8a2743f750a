import { verificationRecord } from '../../lib/domain-verification.js';
import { humanDuration, iso } from '../../lib/time.js';
import {
  SHORT_ID_LENGTH,
  SITE_REGION,
  type DeploymentStatus,
  type Framework,
  type SiteStatus,
} from './hosting.constants.js';
import type { HostingDeployment } from './hosting-deployment.entity.js';
import type { HostingSite } from './hosting-site.entity.js';
import { humanBytes, siteMetrics } from './hosting.simulation.js';
import type { TDeployment, TSite, TSiteDetail } from './hosting.schema.js';

/** The characters of a deployment id that name it in its address. */
export function shortId(deploymentId: string): string {
  return deploymentId.slice(deploymentId.indexOf('_') + 1).slice(0, SHORT_ID_LENGTH);
}

export function siteUrl(slug: string, sitesDomain: string): string {
  return `https://${slug}.${sitesDomain}`;
}

/** The address of one deployment: `https://<slug>-<short id>.<SITES_DOMAIN>`. */
export function deploymentUrl(slug: string, deploymentId: string, sitesDomain: string): string {
  return `https://${slug}-${shortId(deploymentId)}.${sitesDomain}`;
}

/** What the list view needs of a site: the entity, or a row of the list query (hosting.repository.ts). */
export interface SiteView {
  id: string;
  name: string;
  slug: string;
  domain?: string | null;
  domainVerificationToken?: string | null;
  domainVerifiedAt?: Date | null;
  status: SiteStatus;
  sslEnabled: boolean;
  framework: Framework;
  gitRepo: string;
  branch: string;
  user: { id: string };
  liveDeploymentId?: string | null;
  liveDeploymentAt?: Date | null;
  previewDeploymentId?: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The TXT record that verifies a site's custom domain (docs/sites.md, "Custom domains"), and where it stands. */
export function domainVerification(s: SiteView): TSite['domain_verification'] {
  if (!s.domain || !s.domainVerificationToken) return null;
  return {
    status: s.domainVerifiedAt ? 'verified' : 'pending',
    record: verificationRecord(s.domain, s.domainVerificationToken),
  };
}

export function toSiteDto(s: SiteView, sitesDomain: string): TSite {
  return {
    id: s.id,
    name: s.name,
    domain: s.domain ?? null,
    domain_verification: domainVerification(s),
    status: s.status,
    ssl_enabled: s.sslEnabled,
    region: SITE_REGION,
    framework: s.framework,
    url: siteUrl(s.slug, sitesDomain),
    preview_url: s.previewDeploymentId ? deploymentUrl(s.slug, s.previewDeploymentId, sitesDomain) : null,
    git_repo: s.gitRepo,
    branch: s.branch,
    user_id: s.user.id,
    live_deployment_id: s.liveDeploymentId ?? null,
    last_deployment: iso(s.liveDeploymentAt),
    created_at: iso(s.createdAt)!,
    updated_at: iso(s.updatedAt)!,
  };
}

/** The detail view; `environment`: the site's variables in clear (openEnvironment). */
export function toSiteDetailDto(
  s: HostingSite,
  sitesDomain: string,
  now: Date,
  environment: Record<string, string>,
  /** What the edge served in the last 24 hours (real builds); the simulation's figures otherwise. */
  served?: { requests: number; bytes: number },
): TSiteDetail {
  const metrics = siteMetrics(s.id, s.liveSince ?? null, now);
  return {
    ...toSiteDto(s, sitesDomain),
    build_settings: {
      build_command: s.buildCommand,
      output_directory: s.outputDirectory,
      node_version: s.nodeVersion,
    },
    environment_variables: environment,
    metrics: served
      ? { ...metrics, requests_24h: served.requests, bandwidth_24h: humanBytes(served.bytes) }
      : metrics,
  };
}

export function toDeploymentDto(
  d: HostingDeployment,
  site: { id: string; slug: string; liveDeploymentId?: string | null },
  sitesDomain: string,
): TDeployment {
  const status = d.status as DeploymentStatus;
  return {
    id: d.id,
    site_id: site.id,
    status,
    branch: d.branch,
    commit: d.commit,
    message: d.message ?? null,
    builder: d.builder,
    status_message: d.statusMessage ?? null,
    url: status === 'success' ? deploymentUrl(site.slug, d.id, sitesDomain) : null,
    live: site.liveDeploymentId === d.id,
    created_at: iso(d.createdAt)!,
    started_at: iso(d.startedAt),
    completed_at: iso(d.completedAt),
    duration:
      d.startedAt && d.completedAt ? humanDuration(d.completedAt.getTime() - d.startedAt.getTime()) : null,
  };
}
