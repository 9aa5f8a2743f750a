/**
 * The security table: generated from the router itself, so that no procedure escapes it. For every procedure of
 * `appRouter`, from the meta its base procedure set (`auth`, `permission`, `roles`):
 *
 * - it is built on a base procedure (`meta.auth` is set), and public ones are listed in PUBLIC_PROCEDURES;
 * - no token → 401 `UNAUTHORIZED` (in process and over HTTP, with `WWW-Authenticate: Bearer`);
 * - `auth: 'permission'`: a member holding every permission but that one → 403 `FORBIDDEN`;
 *   `auth: 'role'`: a user of a role not listed → 403 `FORBIDDEN`;
 * - a path id (`/x/{id}`): the owner of one organization asking for another organization's resource (from
 *   security-fixtures.ts) → 404 `NOT_FOUND`, and a malformed id → 404.
 *
 * Every check runs in process (createCaller with a real context) and over HTTP for the procedures that have a REST
 * path. What each module must add is described at the top of security-fixtures.ts.
 */
import { expect } from 'chai';
import type { AnyTRPCProcedure } from '@trpc/server';
import { Organization } from '../../server/access/organization.entity.js';
import { PERMISSIONS, type Permission } from '../../server/access/permissions.js';
import { API_KEY_PERMISSIONS } from '../../server/modules/api-keys/api-keys.constants.js';
import { createUserEntity, type Role } from '../../server/access/user.entity.js';
import { newId } from '../../server/lib/ids.js';
import { login } from '../../server/modules/auth/auth.service.js';
import { appRouter } from '../../server/router.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { toAppError, type Meta } from '../../server/trpc/init.js';
import { createOrg, DEFAULT_PASSWORD, signedIn, uniqueEmail, type TestUser } from './factories.js';
import { http } from './http.js';
import { PUBLIC_PROCEDURES, securityFixtures, type NotTenantScoped } from './security-fixtures.js';
import { sharedServer, type Caller, type TestServer } from './server.js';

export interface ProcedureInfo {
  path: string;
  type: 'query' | 'mutation' | 'subscription';
  meta: Meta;
  /** REST method and path, when the procedure has one. */
  rest: { method: string; path: string; params: string[] } | undefined;
}

/** Every procedure of the router with what the table needs to know about it. */
export function listProcedures(): ProcedureInfo[] {
  const procedures = appRouter._def.procedures as unknown as Record<string, AnyTRPCProcedure>;
  return Object.entries(procedures)
    .map(([path, proc]) => {
      const meta = (proc._def.meta ?? {}) as Meta;
      const openapi = meta.openapi;
      return {
        path,
        type: proc._def.type,
        meta,
        rest: openapi
          ? {
              method: openapi.method,
              path: openapi.path,
              params: [...openapi.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!),
            }
          : undefined,
      };
    })
    .sort((a, b) => a.path.localeCompare(b.path));
}

/** Procedure paths closed to API keys whatever their permissions (docs/api-keys.md, "API keys"). */
const CLOSED_TO_KEYS = ['auth.', 'apiKeys.', 'users.', 'webhooks.', 'audit.'];

interface Outcome {
  status: number;
  code: string;
  /** HTTP only. */
  wwwAuthenticate?: string | null;
}

async function callInProcess(caller: Caller, path: string, input: unknown): Promise<Outcome> {
  const fn = path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], caller) as (
    i: unknown,
  ) => Promise<unknown>;
  try {
    await fn(input);
    return { status: 200, code: 'OK' };
  } catch (err) {
    const app = toAppError(err);
    return { status: app.status, code: app.code };
  }
}

/** The HTTP request a REST client would make for `input`: path params in the path, the rest in query or body. */
async function callHttp(s: TestServer, p: ProcedureInfo, token: string | undefined, input: unknown) {
  const rest = p.rest!;
  const fields = { ...((input ?? {}) as Record<string, unknown>) };
  let url = rest.path;
  for (const param of rest.params) {
    const value = fields[param];
    const segment = typeof value === 'string' || typeof value === 'number' ? String(value) : 'missing';
    url = url.replace(`{${param}}`, encodeURIComponent(segment));
    delete fields[param];
  }
  const hasBody = !['GET', 'DELETE', 'HEAD'].includes(rest.method) || p.meta.deleteWithBody === true;
  if (!hasBody) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(fields)) {
      if (v === undefined) continue;
      for (const item of Array.isArray(v) ? v : [v]) q.append(k, String(item));
    }
    if ([...q].length > 0) url += `?${q}`;
  }
  const res = await http(s.baseUrl, rest.method, `/v1${url}`, {
    token,
    ...(hasBody ? { body: fields } : {}),
  });
  return {
    status: res.status,
    code: (res.body as { error?: { code?: string } } | undefined)?.error?.code ?? 'OK',
    wwwAuthenticate: res.headers.get('www-authenticate'),
  };
}

/** A member whose stored set is every permission except `missing` (and the `admin` level that implies it). */
async function memberWithout(s: TestServer, organizationId: string, missing: Permission): Promise<TestUser> {
  const resource = missing.split(':')[0];
  const permissions = PERMISSIONS.filter((p) => p !== missing && p !== `${resource}:admin`);
  return userWith(s, organizationId, 'member', permissions);
}

async function userWith(
  s: TestServer,
  organizationId: string,
  role: Exclude<Role, 'owner'>,
  permissions: string[],
) {
  const em = s.deps.db.orm.em.fork();
  const email = uniqueEmail('sec');
  const user = createUserEntity(em, {
    id: newId('usr'),
    organization: em.getReference(Organization, organizationId),
    email,
    name: 'Security Table',
    passwordHash: await s.deps.passwords.hash(DEFAULT_PASSWORD),
    role,
    status: 'active',
    permissions,
  });
  await em.flush();
  const res = signedIn(await login(createInProcessContext(s.deps), { email, password: DEFAULT_PASSWORD }));
  return {
    id: user.id,
    email,
    password: DEFAULT_PASSWORD,
    organizationId,
    role,
    token: res.token,
    refreshToken: res.refresh_token,
  } satisfies TestUser;
}

function label(p: ProcedureInfo): string {
  return p.rest ? `${p.path} (${p.rest.method} ${p.rest.path})` : p.path;
}

/** Registers one mocha test per procedure, plus the consistency checks of the exception lists. */
export function defineSecurityTable(): void {
  const procedures = listProcedures();

  describe('security table (every procedure of the router)', function () {
    let s: TestServer;
    let owner: TestUser;
    before(async function () {
      s = await sharedServer();
      // On Enterprise, so that no plan stands before the checks (402 on SSO's paths below it).
      owner = await createOrg(s.deps, { plan: 'enterprise' });
    });

    it('lists only existing public procedures, and fixtures only for existing procedures', () => {
      const paths = new Set(procedures.map((p) => p.path));
      for (const name of Object.keys(PUBLIC_PROCEDURES)) {
        expect(paths.has(name), `PUBLIC_PROCEDURES names ${name}, which does not exist`).to.equal(true);
      }
      for (const name of Object.keys(securityFixtures)) {
        expect(paths.has(name), `securityFixtures names ${name}, which does not exist`).to.equal(true);
      }
    });

    for (const p of procedures) {
      it(label(p), async function () {
        const auth = p.meta.auth;
        expect(
          auth,
          `${p.path} is not built on a base procedure of server/trpc/procedures.ts (meta.auth is not set)`,
        ).to.be.oneOf(['public', 'user', 'permission', 'role']);

        if (auth === 'public') {
          expect(
            PUBLIC_PROCEDURES[p.path],
            `${p.path} needs no token: if that is intended, list it in PUBLIC_PROCEDURES (tests/support/security-fixtures.ts)`,
          ).to.be.a('string');
          return;
        }
        expect(
          PUBLIC_PROCEDURES[p.path],
          `${p.path} is listed in PUBLIC_PROCEDURES but requires a token`,
        ).to.equal(undefined);

        // 1. No token → 401.
        const anon = await callInProcess(s.caller(), p.path, undefined);
        expect(anon, `${p.path} without a token (in process)`).to.deep.equal({
          status: 401,
          code: 'UNAUTHORIZED',
        });
        if (p.rest) {
          const res = await callHttp(s, p, undefined, {});
          expect(res, `${label(p)} without a token (HTTP)`).to.deep.equal({
            status: 401,
            code: 'UNAUTHORIZED',
            wwwAuthenticate: 'Bearer',
          });
        }

        // Input for the remaining checks: from the fixture when the procedure takes an id.
        const fixture = securityFixtures[p.path];
        const needsFixture = (p.rest?.params.length ?? 0) > 0;
        if (needsFixture && !fixture) {
          expect.fail(
            `${label(p)} takes an id but has no entry in tests/support/security-fixtures.ts: add one that ` +
              'creates the resource in another organization and returns the input (see the comment at the top).',
          );
        }
        let input: Record<string, unknown> | undefined;
        let crossOrg = true;
        if (fixture) {
          const other = await createOrg(s.deps, { plan: 'enterprise' });
          const made = await fixture({ s, other });
          if ((made as NotTenantScoped).notTenantScoped) crossOrg = false;
          else input = made as Record<string, unknown>;
        }

        // 2. Without the permission (or role) → 403, before anything is looked up.
        let denied: TestUser | undefined;
        if (auth === 'permission') {
          expect(PERMISSIONS, `${p.path}: unknown permission ${p.meta.permission}`).to.include(
            p.meta.permission,
          );
          denied = await memberWithout(s, owner.organizationId, p.meta.permission!);
        } else if (auth === 'role') {
          const roles = p.meta.roles ?? [];
          const outsider = (['member', 'admin'] as const).find((r) => !roles.includes(r));
          if (outsider) denied = await userWith(s, owner.organizationId, outsider, []);
        }
        if (denied) {
          const res = await callInProcess(s.caller(denied.token), p.path, input ?? {});
          expect(res, `${p.path} without ${p.meta.permission ?? 'the role'} (in process)`).to.deep.equal({
            status: 403,
            code: 'FORBIDDEN',
          });
          if (p.rest) {
            const viaHttp = await callHttp(s, p, denied.token, input ?? {});
            expect(viaHttp.status, `${label(p)} without ${p.meta.permission ?? 'the role'} (HTTP)`).to.equal(
              403,
            );
            expect(viaHttp.code).to.equal('FORBIDDEN');
          }
        }

        // 3. Another organization's id, and a malformed id → 404, for a caller who may do everything else.
        if (input && crossOrg) {
          const res = await callInProcess(s.caller(owner.token), p.path, input);
          expect(res, `${p.path} with another organization's id (in process)`).to.deep.equal({
            status: 404,
            code: 'NOT_FOUND',
          });
          if (p.rest) {
            const viaHttp = await callHttp(s, p, owner.token, input);
            expect(viaHttp.status, `${label(p)} with another organization's id (HTTP)`).to.equal(404);
            expect(viaHttp.code).to.equal('NOT_FOUND');
            const malformed = { ...input };
            for (const param of p.rest.params) malformed[param] = 'not-an-id';
            const bad = await callHttp(s, p, owner.token, malformed);
            expect(bad.status, `${label(p)} with a malformed id (HTTP)`).to.equal(404);
          }
        }

        // 4. API keys (docs/api-keys.md, "API keys"): closed to role-gated operations and to /auth, /api-keys, /users,
        // /webhooks, /audit-logs whatever the key holds; elsewhere a key without the permission → 403, and a key
        // with every permission still cannot reach another organization's id.
        const closed = auth === 'role' || CLOSED_TO_KEYS.some((prefix) => p.path.startsWith(prefix));
        const allowed = API_KEY_PERMISSIONS.filter((q) => closed || q !== p.meta.permission);
        const keyWithout =
          auth === 'permission' && !closed
            ? allowed.filter((q) => q !== `${p.meta.permission!.split(':')[0]}:admin`)
            : allowed;
        const { secret, api_key } = await s
          .caller(owner.token)
          .apiKeys.create({ name: `table ${p.path}`, permissions: keyWithout });
        if (closed || auth === 'permission') {
          const res = await callInProcess(s.caller(secret), p.path, input ?? {});
          expect(res, `${p.path} with an API key (in process)`).to.deep.equal({
            status: 403,
            code: 'FORBIDDEN',
          });
          if (p.rest) {
            const viaHttp = await callHttp(s, p, secret, input ?? {});
            expect(viaHttp.status, `${label(p)} with an API key (HTTP)`).to.equal(403);
          }
        }
        if (!closed && input && crossOrg) {
          const full = await s
            .caller(owner.token)
            .apiKeys.create({ name: 'table full', permissions: API_KEY_PERMISSIONS });
          const res = await callInProcess(s.caller(full.secret), p.path, input);
          expect(res, `${p.path} with an API key and another organization's id`).to.deep.equal({
            status: 404,
            code: 'NOT_FOUND',
          });
          await s.caller(owner.token).apiKeys.revoke({ id: full.api_key.id });
        }
        // An organization holds a bounded number of keys: the table's owner gives each back.
        await s.caller(owner.token).apiKeys.revoke({ id: api_key.id });
      });
    }
  });
}
