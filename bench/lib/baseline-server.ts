// The baseline the bench compares GET /v1/auth/me with: a bare Fastify route doing the same work by hand, with no
// framework layers: verify the JWT with a KeyObject made once, then one primary-key query with `pg`.
// Started by bench/run.ts in a child process: PORT, DATABASE_URL, JWT_SECRET.
import { createSecretKey } from 'node:crypto';
import Fastify from 'fastify';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../server/access/tokens.js';

const key = createSecretKey(Buffer.from(process.env.JWT_SECRET ?? '', 'utf8'));
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });

interface UserRow {
  id: string;
  email: string;
  name: string;
  role: string;
  created_at: Date;
  last_login: Date | null;
}

const app = Fastify({ logger: false });
app.get('/healthz', async () => ({ success: true }));
app.get('/v1/auth/me', async (req, reply) => {
  const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
  let sub: string;
  try {
    const claims = jwt.verify(bearer, key, {
      algorithms: ['HS256'],
      issuer: JWT_ISSUER,
      audience: JWT_AUDIENCE,
    });
    if (typeof claims !== 'object' || typeof claims.sub !== 'string') throw new Error('no subject');
    sub = claims.sub;
  } catch {
    return reply.status(401).send({ success: false, error: { code: 'UNAUTHORIZED' } });
  }
  const { rows } = await pool.query<UserRow>(
    'select id, email, name, role, created_at, last_login from users where id = $1',
    [sub],
  );
  const u = rows[0];
  if (!u) return reply.status(401).send({ success: false, error: { code: 'UNAUTHORIZED' } });
  return {
    success: true,
    user: {
      id: u.id,
      email: u.email,
      name: u.name,
      role: u.role,
      created_at: u.created_at.toISOString(),
      last_login: u.last_login?.toISOString() ?? null,
    },
  };
});

await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => {
  void app.close().then(() => pool.end().then(() => process.exit(0)));
});
