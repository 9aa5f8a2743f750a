// The baseline bench/vpn.ts compares GET /v1/vpn/connections with: a bare Fastify route doing the same work by
// hand, with no framework layers: verify the JWT with a KeyObject made once, then the list's two queries with `pg`
// (total, then one page of 20 newest first) and the same JSON, simulated usage included.
// Started by bench/vpn.ts in a child process: PORT, DATABASE_URL, JWT_SECRET.
import { createSecretKey } from 'node:crypto';
import Fastify from 'fastify';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../server/access/tokens.js';

const key = createSecretKey(Buffer.from(process.env.JWT_SECRET ?? '', 'utf8'));
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
// bigint columns as numbers, as the API shows them.
pg.types.setTypeParser(20, (v) => Number(v));

interface Row {
  id: string;
  name: string;
  status: string;
  status_message: string | null;
  location: string;
  protocol: string;
  server_id: string;
  user_id: string;
  auto_connect: boolean;
  created_at: Date;
  updated_at: Date;
  connected_at: Date | null;
  last_activity: Date | null;
  upload_bytes: number;
  download_bytes: number;
  session_upload_base: number;
  session_download_base: number;
  upload_rate: number;
  download_rate: number;
}

function usage(r: Row, now: number) {
  if (r.status !== 'active' || !r.connected_at) {
    return { upload: r.upload_bytes, download: r.download_bytes, last: r.last_activity };
  }
  const ms = Math.max(0, now - r.connected_at.getTime());
  return {
    upload: Math.max(r.upload_bytes, r.session_upload_base + Math.floor((r.upload_rate * ms) / 1000)),
    download: Math.max(r.download_bytes, r.session_download_base + Math.floor((r.download_rate * ms) / 1000)),
    last: new Date(Math.max(now, r.last_activity?.getTime() ?? 0)),
  };
}

const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ success: true }));
app.get<{ Querystring: { page?: string; limit?: string } }>('/v1/vpn/connections', async (req, reply) => {
  const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
  let sub: string;
  let org: string;
  try {
    const claims = jwt.verify(bearer, key, {
      algorithms: ['HS256'],
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
    });
    if (typeof claims !== 'object' || typeof claims.sub !== 'string' || typeof claims.org !== 'string')
      throw new Error('claims');
    sub = claims.sub;
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
    'select count(*) as n from vpn_connections where organization_id = $1 and user_id = $2',
    [org, sub],
  );
  const { rows } = await pool.query<Row>(
    `select id, name, status, status_message, location, protocol, server_id, user_id, auto_connect, created_at,
            updated_at, connected_at, last_activity, upload_bytes, download_bytes, session_upload_base,
            session_download_base, upload_rate, download_rate
       from vpn_connections where organization_id = $1 and user_id = $2
      order by created_at desc, id desc limit $3 offset $4`,
    [org, sub, limit, (page - 1) * limit],
  );
  const now = Date.now();
  return {
    success: true,
    connections: rows.map((r) => {
      const u = usage(r, now);
      return {
        id: r.id,
        name: r.name,
        status: r.status,
        status_message: r.status_message,
        location: r.location,
        protocol: r.protocol,
        server_id: r.server_id,
        user_id: r.user_id,
        auto_connect: r.auto_connect,
        created_at: r.created_at.toISOString(),
        updated_at: r.updated_at.toISOString(),
        connected_at: r.status === 'active' ? (r.connected_at?.toISOString() ?? null) : null,
        last_activity: u.last?.toISOString() ?? null,
        data_usage: { upload: u.upload, download: u.download },
      };
    }),
    total: Number(total.rows[0]!.n),
    page,
    limit,
  };
});

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => {
  void app.close().then(() => pool.end().then(() => process.exit(0)));
});
