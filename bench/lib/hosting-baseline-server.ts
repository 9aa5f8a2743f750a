// The baseline bench/hosting.ts compares GET /v1/hosting/sites with: a bare Fastify route doing the same work by
// hand, with no framework layers: verify the JWT with a KeyObject made once, then the list's two queries with `pg`
// (total, then one page of 20 newest first) and the same JSON (the list view of server/modules/hosting/hosting.dto.ts).
// Started by bench/hosting.ts in a child process: PORT, DATABASE_URL, JWT_SECRET, SITES_DOMAIN.
import { createSecretKey } from 'node:crypto';
import Fastify from 'fastify';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../server/access/tokens.js';

const key = createSecretKey(Buffer.from(process.env.JWT_SECRET ?? '', 'utf8'));
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const domain = process.env.SITES_DOMAIN ?? 'sites.example.com';

interface Row {
  id: string;
  name: string;
  slug: string;
  domain: string | null;
  status: string;
  ssl_enabled: boolean;
  framework: string;
  git_repo: string;
  branch: string;
  user_id: string;
  live_deployment_id: string | null;
  live_deployment_at: Date | null;
  preview_deployment_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const shortId = (id: string) => id.slice(id.indexOf('_') + 1).slice(0, 8);

const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ success: true }));
app.get<{ Querystring: { page?: string; limit?: string } }>('/v1/hosting/sites', async (req, reply) => {
  const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
  let org: string;
  try {
    const claims = jwt.verify(bearer, key, {
      algorithms: ['HS256'],
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
    });
    if (typeof claims !== 'object' || typeof claims.org !== 'string') throw new Error('claims');
    org = claims.org;
  } catch {
    return reply.status(401).send({ success: false, error: { code: 'UNAUTHORIZED' } });
  }
  const page = Number(req.query.page ?? 1);
  const limit = Number(req.query.limit ?? 20);
  if (!Number.isInteger(page) || page < 1 || !Number.isInteger(limit) || limit < 1 || limit > 100) {
    return reply.status(400).send({ success: false, error: { code: 'VALIDATION_ERROR' } });
  }
  const total = await pool.query<{ n: string }>(
    'select count(*) as n from hosting_sites where organization_id = $1',
    [org],
  );
  const { rows } = await pool.query<Row>(
    `select id, name, slug, domain, status, ssl_enabled, framework, git_repo, branch, user_id, live_deployment_id,
            live_deployment_at, preview_deployment_id, created_at, updated_at
       from hosting_sites where organization_id = $1
      order by created_at desc, id desc limit $2 offset $3`,
    [org, limit, (page - 1) * limit],
  );
  return {
    success: true,
    sites: rows.map((r) => ({
      id: r.id,
      name: r.name,
      domain: r.domain,
      status: r.status,
      ssl_enabled: r.ssl_enabled,
      region: 'global',
      framework: r.framework,
      url: `https://${r.slug}.${domain}`,
      preview_url: r.preview_deployment_id
        ? `https://${r.slug}-${shortId(r.preview_deployment_id)}.${domain}`
        : null,
      git_repo: r.git_repo,
      branch: r.branch,
      user_id: r.user_id,
      live_deployment_id: r.live_deployment_id,
      last_deployment: r.live_deployment_at?.toISOString() ?? null,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    })),
    total: Number(total.rows[0]!.n),
    page,
    limit,
  };
});

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => {
  void app.close().then(() => pool.end().then(() => process.exit(0)));
});
