import type { Database, Em } from '../../db/orm.js';
import type { PageRequest } from '../../lib/pagination.js';
import { epochMs, findRawPage, fromEpochMs as ms, type RawPageSpec } from '../../db/raw-page.js';
import { FRAMEWORKS, SITE_STATUSES, type Framework, type SiteStatus } from './hosting.constants.js';
import type { SiteView } from './hosting.dto.js';

/**
 * The site list is the module's hot read: one prepared round trip for the page and its total, rows mapped straight
 * to the list view (server/db/raw-page.ts). Everything else goes through the ORM.
 */

/** The list's columns, and the filter keys (access/scope.ts: ownedBy, ownedListFilter; the list filters) it takes. */
const LIST: RawPageSpec = {
  table: 'hosting_sites',
  select: `
    id, name, slug, domain, status, ssl_enabled, framework, git_repo, branch, user_id,
    live_deployment_id, ${epochMs('live_deployment_at')} as live_ms, preview_deployment_id,
    ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms`,
  columns: {
    organization: 'organization_id',
    user: 'user_id',
    status: 'status',
    framework: 'framework',
  },
  counts: {
    list: 'hosting_sites',
    scope: 'organization',
    owner: 'user',
    dims: [
      { key: 'status', values: SITE_STATUSES },
      { key: 'framework', values: FRAMEWORKS },
    ],
  },
};

interface ListRow {
  id: string;
  name: string;
  slug: string;
  domain: string | null;
  status: SiteStatus;
  ssl_enabled: boolean;
  framework: Framework;
  git_repo: string;
  branch: string;
  user_id: string;
  live_deployment_id: string | null;
  live_ms: number | string | null;
  preview_deployment_id: string | null;
  created_ms: number | string;
  updated_ms: number | string;
}

function toView(r: ListRow): SiteView {
  return {
    id: r.id,
    name: r.name,
    slug: r.slug,
    domain: r.domain,
    status: r.status,
    sslEnabled: r.ssl_enabled,
    framework: r.framework,
    gitRepo: r.git_repo,
    branch: r.branch,
    user: { id: r.user_id },
    liveDeploymentId: r.live_deployment_id,
    liveDeploymentAt: ms(r.live_ms),
    previewDeploymentId: r.preview_deployment_id,
    createdAt: ms(r.created_ms)!,
    updatedAt: ms(r.updated_ms)!,
  };
}

/** One page of sites matching `filter` (already scoped), newest first, with the total. */
export async function findSitePage(
  em: Em,
  db: Database,
  filter: Record<string, unknown>,
  page: PageRequest,
): Promise<{ items: SiteView[]; total: number; hasMore: boolean }> {
  const found = await findRawPage<ListRow>(em, db, LIST, filter, page);
  return { total: found.total, hasMore: found.hasMore, items: found.rows.map(toView) };
}
