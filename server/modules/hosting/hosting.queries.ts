import { CompiledQuery, type Transaction } from 'kysely';
import type { Em } from '../../db/orm.js';
import type { Framework, SiteStatus } from './hosting.constants.js';
import type { SiteView } from './hosting.dto.js';

/**
 * The site list is the module's hot read: one round trip (total and page together) and rows mapped straight to the
 * list view, without hydrating entities. Everything else goes through the ORM.
 */

/** Columns of a filter from access/scope.ts (ownedBy, ownedListFilter) and the list filters. */
const COLUMNS: Record<string, string> = {
  organization: 'organization_id',
  user: 'user_id',
  status: 'status',
  framework: 'framework',
};

/** Equality on the known columns, and the scope helpers' "nothing" (`id: {$in: []}`). */
function whereClause(filter: Record<string, unknown>): { sql: string; params: unknown[] } | null {
  const parts: string[] = [];
  const params: unknown[] = [];
  for (const [key, value] of Object.entries(filter)) {
    const $in =
      key === 'id' && value && typeof value === 'object' ? (value as { $in?: unknown }).$in : undefined;
    if (Array.isArray($in) && $in.length === 0) return null;
    const column = COLUMNS[key];
    if (!column || typeof value !== 'string') throw new Error(`unsupported list filter ${key}`);
    params.push(value);
    parts.push(`"${column}" = $${params.length}`);
  }
  return { sql: parts.length ? parts.join(' and ') : 'true', params };
}

interface ListRow {
  total: number | string;
  id: string | null;
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

const ms = (v: number | string | null): Date | null => (v === null ? null : new Date(Number(v)));

function toView(r: ListRow): SiteView {
  return {
    id: r.id!,
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

const epochMs = (column: string) => `(extract(epoch from "${column}") * 1000)::float8`;

/** One page of sites matching `filter` (already scoped), newest first, with the total. */
export async function findSitePage(
  em: Em,
  filter: Record<string, unknown>,
  page: { page: number; limit: number },
): Promise<{ items: SiteView[]; total: number }> {
  const where = whereClause(filter);
  if (!where) return { items: [], total: 0 };
  const n = where.params.length;
  const sql = `
    select t.total, p.*
      from (select count(*) as total from hosting_sites where ${where.sql}) t
      left join lateral (
        select id, name, slug, domain, status, ssl_enabled, framework, git_repo, branch, user_id,
               live_deployment_id, ${epochMs('live_deployment_at')} as live_ms, preview_deployment_id,
               ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms
          from hosting_sites
         where ${where.sql}
         order by created_at desc, id desc
         limit $${n + 1} offset $${n + 2}
      ) p on true`;
  const runner = em.getTransactionContext<Transaction<unknown>>() ?? em.getConnection().getClient();
  const result = await runner.executeQuery<ListRow>(
    CompiledQuery.raw(sql, [...where.params, page.limit, (page.page - 1) * page.limit]),
  );
  const rows = result.rows;
  return {
    total: Number(rows[0]?.total ?? 0),
    items: rows.filter((r) => r.id !== null).map(toView),
  };
}
