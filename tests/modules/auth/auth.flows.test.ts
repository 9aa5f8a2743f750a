// Test tier: server
import { createHash, createHmac, generateKeyPairSync } from 'node:crypto';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { User } from '../../../server/access/user.entity.js';
import { JWT_AUDIENCE, JWT_ISSUER } from '../../../server/access/tokens.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createOrg, createUser, uniqueEmail } from '../../support/factories.js';
import { testConfig } from '../../support/env.js';
import { expectError } from '../../transport/envelope.js';

const USER_FIELDS = ['id', 'email', 'name', 'role', 'created_at', 'last_login'];
const TOKEN_FIELDS = ['success', 'token', 'refresh_token', 'token_type', 'expires_in'];
const TOKEN_VALUES = { success: true, token_type: 'Bearer', expires_in: 3600 };
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('auth flows (docs/getting-started.md, "Calling the API")', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const post = (path: string, body: unknown, token?: string) =>
    http(s.baseUrl, 'POST', `/v1${path}`, { body, token });
  const me = (token: string) => http(s.baseUrl, 'GET', '/v1/auth/me', { token });
  const withoutRequestId = (b: any) => ({ ...b, error: { ...b.error, request_id: undefined } });

  describe('POST /auth/login', () => {
    it('returns the token pair, the token type, expires_in 3600 and the user', async () => {
      const owner = await createOrg(s.deps);
      const res = await post('/auth/login', { email: owner.email.toUpperCase(), password: owner.password });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body)).to.have.members([...TOKEN_FIELDS, 'user']);
      expect(res.body).to.include(TOKEN_VALUES);
      expect(res.body.refresh_token).to.match(/^rt_[A-Za-z0-9_-]{43,}$/);
      expect(res.body.user).to.include.all.keys(USER_FIELDS);
      expect(res.body.user).to.include({ id: owner.id, email: owner.email, role: 'owner' });
      expect(res.body.user.last_login).to.match(ISO_MS);
      expect(res.body.user.created_at).to.match(ISO_MS);
      const claims = jwt.decode(res.body.token, { complete: true })!;
      expect(claims.header.alg).to.equal('HS256');
      const p = claims.payload as jwt.JwtPayload;
      expect(p).to.include({ iss: JWT_ISSUER, aud: JWT_AUDIENCE, sub: owner.id, org: owner.organizationId });
      expect(p.jti).to.be.a('string');
      expect(p.exp! - p.iat!).to.equal(3600);
    });

    it('gives the same 401 body for an unknown email, a wrong password and a suspended user', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId);
      await s.deps.db.orm.em.fork().nativeUpdate(User, { id: member.id }, { status: 'suspended' });
      const unknown = await post('/auth/login', { email: uniqueEmail('nobody'), password: owner.password });
      const wrong = await post('/auth/login', { email: owner.email, password: 'not-the-password' });
      const suspended = await post('/auth/login', { email: member.email, password: member.password });
      for (const res of [unknown, wrong, suspended]) {
        expectError(res, 'INVALID_CREDENTIALS');
        expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      }
      expect(withoutRequestId(unknown.body)).to.deep.equal(withoutRequestId(wrong.body));
      expect(withoutRequestId(suspended.body)).to.deep.equal(withoutRequestId(wrong.body));
    });

    it('refuses a missing field or an empty body with 400 VALIDATION_ERROR', async () => {
      expectError(await post('/auth/login', { email: 'a@b.test' }), 'VALIDATION_ERROR');
      expectError(await post('/auth/login', {}), 'VALIDATION_ERROR');
      expectError(await post('/auth/login', { email: 5, password: [] }), 'VALIDATION_ERROR');
    });
  });

  describe('POST /auth/refresh', () => {
    it('rotates: a new pair, the new access token works, refresh tokens are stored hashed', async () => {
      const owner = await createOrg(s.deps);
      const res = await post('/auth/refresh', { refresh_token: owner.refreshToken });
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body)).to.have.members(TOKEN_FIELDS);
      expect(res.body).to.include(TOKEN_VALUES);
      expect(res.body.refresh_token).to.match(/^rt_/).and.not.equal(owner.refreshToken);
      expect((await me(res.body.token)).status).to.equal(200);

      const rows = await s.deps.db.orm.em
        .fork()
        .execute<{ token_hash: string }[]>('select token_hash from refresh_tokens');
      const hashes = rows.map((r) => r.token_hash);
      const sha = (v: string) => createHash('sha256').update(v).digest('hex');
      expect(hashes).to.include(sha(res.body.refresh_token));
      expect(hashes).not.to.include(res.body.refresh_token);

      // The next rotation works from the new token.
      const again = await post('/auth/refresh', { refresh_token: res.body.refresh_token });
      expect(again.status).to.equal(200);
    });

    it('detects reuse of a rotated token and revokes the whole login session', async () => {
      const owner = await createOrg(s.deps);
      const first = await post('/auth/refresh', { refresh_token: owner.refreshToken });
      expect(first.status).to.equal(200);

      const reuse = await post('/auth/refresh', { refresh_token: owner.refreshToken });
      expectError(reuse, 'INVALID_CREDENTIALS');

      // Every token of that session is dead: both access tokens and the newest refresh token.
      expectError(await me(owner.token), 'UNAUTHORIZED');
      expectError(await me(first.body.token), 'UNAUTHORIZED');
      expectError(
        await post('/auth/refresh', { refresh_token: first.body.refresh_token }),
        'INVALID_CREDENTIALS',
      );

      // Another login of the same user is a different session and keeps working.
      const other = await post('/auth/login', { email: owner.email, password: owner.password });
      expect((await me(other.body.token)).status).to.equal(200);
    });

    it('lets exactly one of several concurrent refreshes with the same token win', async () => {
      const owner = await createOrg(s.deps);
      const results = await Promise.all(
        Array.from({ length: 5 }, () => post('/auth/refresh', { refresh_token: owner.refreshToken })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).to.deep.equal([200, 401, 401, 401, 401]);
      for (const r of results.filter((x) => x.status === 401)) expectError(r, 'INVALID_CREDENTIALS');
      // The losers presented a token that had just been used: reuse detection revoked the session.
      const winner = results.find((r) => r.status === 200)!;
      expectError(
        await post('/auth/refresh', { refresh_token: winner.body.refresh_token }),
        'INVALID_CREDENTIALS',
      );
    });

    it('refuses unknown, malformed and access tokens as refresh tokens', async () => {
      const owner = await createOrg(s.deps);
      for (const refresh_token of ['rt_unknown', 'nonsense', owner.token]) {
        expectError(await post('/auth/refresh', { refresh_token }), 'INVALID_CREDENTIALS');
      }
      expectError(await post('/auth/refresh', {}), 'VALIDATION_ERROR');
      // None of this harmed the real session.
      expect((await me(owner.token)).status).to.equal(200);
    });
  });

  describe('POST /auth/logout', () => {
    it('revokes that access token and its refresh token, and only that session', async () => {
      const owner = await createOrg(s.deps);
      const second = await post('/auth/login', { email: owner.email, password: owner.password });
      const res = await post('/auth/logout', {}, owner.token);
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      expect(res.body.message).to.be.a('string');

      const after = await me(owner.token);
      expectError(after, 'UNAUTHORIZED');
      expect(after.headers.get('www-authenticate')).to.equal('Bearer');
      expectError(await post('/auth/refresh', { refresh_token: owner.refreshToken }), 'INVALID_CREDENTIALS');
      expectError(await post('/auth/logout', {}, owner.token), 'UNAUTHORIZED');
      expect((await me(second.body.token)).status).to.equal(200);
    });

    it('needs a token and accepts only an empty object', async () => {
      expectError(await post('/auth/logout', {}), 'UNAUTHORIZED');
      const owner = await createOrg(s.deps);
      expectError(await post('/auth/logout', { all: true }, owner.token), 'VALIDATION_ERROR');
      expect((await me(owner.token)).status).to.equal(200);
    });
  });

  describe('GET /auth/me', () => {
    it('returns the user with id, email, name, role, created_at, last_login', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId, { name: 'Mia Member' });
      const res = await me(member.token);
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      expect(res.body.user).to.include.all.keys(USER_FIELDS);
      expect(res.body.user).to.include({
        id: member.id,
        email: member.email,
        name: 'Mia Member',
        role: 'member',
      });
    });

    it('applies a role change on the next call, and refuses suspended or deleted users', async () => {
      const owner = await createOrg(s.deps);
      const a = await createUser(s.deps, owner.organizationId);
      const b = await createUser(s.deps, owner.organizationId);
      const em = s.deps.db.orm.em.fork();
      await em.nativeUpdate(User, { id: a.id }, { role: 'admin' });
      expect((await me(a.token)).body.user.role).to.equal('admin');
      expect((await s.caller(a.token).auth.me()).user.role).to.equal('admin');

      await em.nativeUpdate(User, { id: a.id }, { status: 'suspended' });
      expectError(await me(a.token), 'UNAUTHORIZED');
      expectError(await post('/auth/refresh', { refresh_token: a.refreshToken }), 'INVALID_CREDENTIALS');

      await em.nativeUpdate(User, { id: b.id }, { deletedAt: new Date() });
      expectError(await me(b.token), 'UNAUTHORIZED');
      expectError(await post('/auth/login', { email: b.email, password: b.password }), 'INVALID_CREDENTIALS');
    });
  });

  describe('POST /auth/register', () => {
    const newAccount = (over: Record<string, unknown> = {}) => ({
      email: uniqueEmail('reg'),
      password: 'a-good-password',
      name: 'Rita Register',
      organization_name: 'Rita Co',
      ...over,
    });

    it('creates an organization on the starter plan with its owner: 201, Location, the login body', async () => {
      const input = newAccount();
      const res = await post('/auth/register', input);
      expect(res.status, res.text).to.equal(201);
      const login = await post('/auth/login', { email: input.email, password: input.password });
      expect(Object.keys(res.body)).to.have.members(Object.keys(login.body));
      expect(Object.keys(res.body.user)).to.have.members(Object.keys(login.body.user));
      expect(res.body).to.include(TOKEN_VALUES);
      expect(res.body.user).to.include({ email: input.email, name: 'Rita Register', role: 'owner' });
      expect(res.body.user.last_login).to.match(ISO_MS);
      expect(res.headers.get('location')).to.equal(
        `${s.deps.config.publicBaseUrl}/v1/users/${res.body.user.id}`,
      );
      expect((await me(res.body.token)).body.user.id).to.equal(res.body.user.id);

      const [org] = await s.deps.db.orm.em
        .fork()
        .execute<{ plan: string; name: string }[]>(
          'select o.plan, o.name from organizations o join users u on u.organization_id = o.id where u.id = ?',
          [res.body.user.id],
        );
      expect(org).to.deep.equal({ plan: 'starter', name: 'Rita Co' });
      const events = await s.deps.db.orm.em
        .fork()
        .execute<{ type: string }[]>('select type from events where organization_id = ?', [
          res.body.user.organization_id,
        ]);
      expect(events.map((e) => e.type)).to.include('user.created');
    });

    it('refuses a duplicate email (any letter case) with 409 CONFLICT and creates nothing', async () => {
      const input = newAccount();
      expect((await post('/auth/register', input)).status).to.equal(201);
      const orgName = `Dup ${Date.now()}`;
      const dup = await post('/auth/register', {
        ...input,
        email: input.email.toUpperCase(),
        organization_name: orgName,
      });
      expectError(dup, 'CONFLICT');
      const rows = await s.deps.db.orm.em
        .fork()
        .execute('select id from organizations where name = ?', [orgName]);
      expect(rows).to.have.length(0);
    });

    it('refuses bad input with 400 and details, creating nothing', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ email: 'nope' }, 'email'],
        [{ password: 'short' }, 'password'],
        [{ name: '' }, 'name'],
        [{ organization_name: undefined }, 'organization_name'],
        [{ role: 'admin' }, 'role'],
        [{ plan: 'enterprise' }, 'plan'],
      ];
      for (const [over, path] of cases) {
        const input = newAccount(over);
        const err = expectError(await post('/auth/register', input), 'VALIDATION_ERROR');
        expect(err.details!.map((d: { path: string }) => d.path)).to.include(path);
        const rows = await s.deps.db.orm.em
          .fork()
          .execute('select id from users where email = ?', [String(input.email).toLowerCase()]);
        expect(rows, path).to.have.length(0);
      }
    });

    it('counts password length in UTF-8 bytes: 72 is fine, 73 is refused and never truncated', async () => {
      const p72 = 'é'.repeat(36); // 72 bytes, 36 characters
      const p73 = `${p72}a`;
      expect(Buffer.byteLength(p72)).to.equal(72);
      const tooLong = newAccount({ password: p73 });
      const err = expectError(await post('/auth/register', tooLong), 'VALIDATION_ERROR');
      expect(err.details).to.deep.include({
        path: 'password',
        message: 'Password must be at most 72 bytes (UTF-8)',
      });
      expectError(
        await post('/auth/register', newAccount({ password: '😀'.repeat(19) })),
        'VALIDATION_ERROR',
      );
      expectError(await post('/auth/register', newAccount({ password: '😀a' })), 'VALIDATION_ERROR');

      const ok = newAccount({ password: p72 });
      expect((await post('/auth/register', ok)).status).to.equal(201);
      expect((await post('/auth/login', { email: ok.email, password: p72 })).status).to.equal(200);
      // A longer password sharing the first 72 bytes is not accepted as the same password.
      expectError(await post('/auth/login', { email: ok.email, password: p73 }), 'VALIDATION_ERROR');
      const emoji = newAccount({ password: '😀'.repeat(18) });
      expect((await post('/auth/register', emoji)).status).to.equal(201);
    });

    it('hashes with bcrypt at the configured cost', async () => {
      const input = newAccount();
      await post('/auth/register', input);
      const [row] = await s.deps.db.orm.em
        .fork()
        .execute<{ password_hash: string }[]>('select password_hash from users where email = ?', [
          input.email,
        ]);
      const cost = String(s.deps.config.bcryptCost).padStart(2, '0');
      expect(row!.password_hash).to.match(new RegExp(`^\\$2[aby]\\$${cost}\\$`));
      expect(row!.password_hash).not.to.include(input.password);
    });
  });

  describe('access tokens are pinned to HS256, issuer and audience', () => {
    const secret = testConfig().jwtSecret!;
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    /** A token signed by hand (HS256, the server's secret), whatever its claims: jsonwebtoken refuses to sign some. */
    const hs256 = (payload: object) => {
      const unsigned = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(payload)}`;
      return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`;
    };

    async function claimsOf() {
      const owner = await createOrg(s.deps);
      const p = jwt.decode(owner.token) as jwt.JwtPayload;
      return { owner, claims: { sub: p.sub!, org: p.org as string, sid: p.sid as string, jti: p.jti! } };
    }

    it('accepts the genuine token (control)', async () => {
      const { owner } = await claimsOf();
      expect((await me(owner.token)).status).to.equal(200);
    });

    it('refuses forged, misaddressed and malformed tokens with 401 UNAUTHORIZED', async () => {
      const { claims } = await claimsOf();
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const opts = { issuer: JWT_ISSUER, audience: JWT_AUDIENCE, expiresIn: 3600 } as const;
      const forged: Record<string, string> = {
        'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...claims, iss: JWT_ISSUER, aud: JWT_AUDIENCE, iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 3600 })}.`,
        RS256: jwt.sign(claims, privateKey, { ...opts, algorithm: 'RS256' }),
        HS512: jwt.sign(claims, secret, { ...opts, algorithm: 'HS512' }),
        HS384: jwt.sign(claims, secret, { ...opts, algorithm: 'HS384' }),
        'wrong issuer': jwt.sign(claims, secret, { ...opts, issuer: 'someone-else' }),
        'wrong audience': jwt.sign(claims, secret, { ...opts, audience: 'someone-else' }),
        'no issuer': jwt.sign(claims, secret, { audience: JWT_AUDIENCE, expiresIn: 3600 }),
        'wrong secret': jwt.sign(claims, 'another-secret-another-secret-another-secret', opts),
        'missing session claim': jwt.sign({ ...claims, sid: undefined }, secret, opts),
        'other organization': jwt.sign({ ...claims, org: 'org_someoneelse000000000' }, secret, opts),
        'not before in the future': jwt.sign(claims, secret, { ...opts, notBefore: 600 }),
        // Correctly signed, issuer and audience right, but without an expiry: it would never lapse.
        'no exp': jwt.sign(claims, secret, { issuer: JWT_ISSUER, audience: JWT_AUDIENCE }),
        'exp not a number': hs256({
          ...claims,
          iss: JWT_ISSUER,
          aud: JWT_AUDIENCE,
          iat: Math.floor(Date.now() / 1000),
          exp: 'never',
        }),
        garbage: 'abc.def.ghi',
        'not a jwt': 'hello',
      };
      for (const [label, token] of Object.entries(forged)) {
        const res = await me(token);
        expect(res.status, label).to.equal(401);
        expectError(res, 'UNAUTHORIZED');
        expect(res.headers.get('www-authenticate'), label).to.equal('Bearer');
      }
    });

    it('refuses other schemes and a bare "Bearer" with 401 UNAUTHORIZED', async () => {
      const { owner } = await claimsOf();
      for (const authorization of [
        `Basic ${owner.token}`,
        'Bearer',
        'Bearer ',
        `Token ${owner.token}`,
        owner.token,
      ]) {
        const res = await http(s.baseUrl, 'GET', '/v1/auth/me', { headers: { authorization } });
        expectError(res, 'UNAUTHORIZED');
      }
      const lower = await http(s.baseUrl, 'GET', '/v1/auth/me', {
        headers: { authorization: `bearer ${owner.token}` },
      });
      expect(lower.status).to.equal(200);
    });

    it('answers an expired token with 401 TOKEN_EXPIRED', async () => {
      const { claims } = await claimsOf();
      const twoHoursAgo = Math.floor(Date.now() / 1000) - 7200;
      const expired = s.deps.tokens.sign(claims, twoHoursAgo);
      const res = await me(expired);
      expectError(res, 'TOKEN_EXPIRED');
      expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      const trpc = await http(s.baseUrl, 'GET', '/trpc/auth.me', { token: expired });
      expect(trpc.status).to.equal(401);
      expect(trpc.body.error.data.code).to.equal('TOKEN_EXPIRED');
      let thrown: any;
      await s
        .caller(expired)
        .auth.me()
        .catch((e: unknown) => (thrown = e));
      expect(thrown?.cause?.code).to.equal('TOKEN_EXPIRED');
    });
  });
});
