// The baseline bench/databases.ts compares GET /v1/databases with: a bare Fastify route doing the same work by
// hand, with no framework layers: verify the JWT with a KeyObject made once, then the list's two queries with `pg`
// (total, then one page of 20 newest first) and the same JSON, masked connection strings and simulated metrics
// included (the same simulation function as the server's).
// Started by bench/databases.ts in a child process: PORT, DATABASE_URL, JWT_SECRET.
import { createSecretKey } from 'node:crypto';
import Fastify from 'fastify';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../server/access/tokens.js';
import {
  ENGINE_PORTS,
  ENGINE_URLS,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
} from '../../server/modules/databases/databases.constants.js';
import { SimulatedDatabaseDriver } from '../../server/modules/databases/simulated-databases.driver.js';

const key = createSecretKey(Buffer.from(process.env.JWT_SECRET ?? '', 'utf8'));
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const simulation = new SimulatedDatabaseDriver(0);

interface Row {
  id: string;
  name: string;
  engine: DatabaseEngine;
  version: string;
  status: string;
  region: DatabaseRegion;
  size: DatabaseSize;
  host: string;
  db_name: string;
  db_user: string;
  multi_az: boolean;
  backup_enabled: boolean;
  backup_retention: number;
  user_id: string;
  created_at: Date;
  updated_at: Date;
  last_backup_at: Date | null;
  next_backup_at: Date | null;
  deletion_scheduled_at: Date | null;
}

const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ success: true }));
app.get<{ Querystring: { page?: string; limit?: string } }>('/v1/databases', async (req, reply) => {
  const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
  let org: string;
  try {
    const claims = jwt.verify(bearer, key, {
      algorithms: ['HS256'],
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
    });
    if (typeof claims !== 'object' || typeof claims.sub !== 'string' || typeof claims.org !== 'string')
      throw new Error('claims');
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
    'select count(*) as n from databases where organization_id = $1 and removed_at is null',
    [org],
  );
  const { rows } = await pool.query<Row>(
    `select id, name, engine, version, status, region, size, host, db_name, db_user, multi_az, backup_enabled,
            backup_retention, user_id, created_at, updated_at, last_backup_at, next_backup_at, deletion_scheduled_at
       from databases where organization_id = $1 and removed_at is null
      order by created_at desc, id desc limit $2 offset $3`,
    [org, limit, (page - 1) * limit],
  );
  const now = new Date();
  return {
    success: true,
    databases: rows.map((r) => {
      const serving = r.status === 'running' || r.status === 'resizing';
      const m = serving ? simulation.metricsAt({ id: r.id, size: r.size }, now) : null;
      const url = ENGINE_URLS[r.engine];
      return {
        id: r.id,
        name: r.name,
        engine: r.engine,
        version: r.version,
        status: r.status,
        region: r.region,
        size: r.size,
        storage: SIZE_SPECS[r.size].storage,
        connection_string: `${url.scheme}://${r.db_user}:****@${r.host}:${ENGINE_PORTS[r.engine]}/${r.db_name}?${url.tls}`,
        metrics: {
          cpu_usage: m?.cpuUsage ?? 0,
          memory_usage: m?.memoryUsage ?? 0,
          storage_usage: m?.storageUsage ?? 0,
        },
        backup_enabled: r.backup_enabled,
        multi_az: r.multi_az,
        backup_retention: r.backup_retention,
        user_id: r.user_id,
        created_at: r.created_at.toISOString(),
        updated_at: r.updated_at.toISOString(),
        last_backup: r.last_backup_at?.toISOString() ?? null,
        next_backup: r.next_backup_at?.toISOString() ?? null,
        deletion_scheduled: r.status === 'deleting' ? (r.deletion_scheduled_at?.toISOString() ?? null) : null,
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
