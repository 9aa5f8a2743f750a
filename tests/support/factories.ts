import { randomBytes } from 'node:crypto';
import { Organization } from '../../server/access/organization.entity.js';
import { createUserEntity, type Role } from '../../server/access/user.entity.js';
import { initialPermissions, type Permission } from '../../server/access/permissions.js';
import { createOrganizationWithOwner, login } from '../../server/modules/auth/auth.service.js';
import type { AppDeps } from '../../server/kit/deps.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { newId } from '../../server/lib/ids.js';
import type { PlanId } from '../../server/lib/plans.js';

export const DEFAULT_PASSWORD = 'correct-horse-battery';

export function uniqueEmail(label = 'user'): string {
  return `${label}-${randomBytes(6).toString('hex')}@example.test`;
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
  organizationId: string;
  role: Role;
  token: string;
  refreshToken: string;
}

/** A login body that issued tokens (two-factor off); a challenge fails the test. */
export function signedIn<T extends object>(res: T): Exclude<T, { two_factor_required: true }> {
  if ('two_factor_required' in res) throw new Error('expected tokens, got a two-factor challenge');
  return res as Exclude<T, { two_factor_required: true }>;
}

async function loginAs(deps: AppDeps, email: string, password: string) {
  const ctx = createInProcessContext(deps);
  return signedIn(await login(ctx, { email, password }));
}

/** A new organization (on `plan`) with its owner, logged in. */
export async function createOrg(
  deps: AppDeps,
  opts: { plan?: PlanId; name?: string; password?: string } = {},
): Promise<TestUser> {
  const email = uniqueEmail('owner');
  const password = opts.password ?? DEFAULT_PASSWORD;
  const em = deps.db.orm.em.fork();
  const user = await createOrganizationWithOwner(deps, em, {
    email,
    password,
    name: 'Test Owner',
    organizationName: opts.name ?? 'Test Org',
  });
  if (opts.plan && opts.plan !== 'starter') {
    await em.nativeUpdate(Organization, { id: user.organization.id }, { plan: opts.plan });
  }
  const res = await loginAs(deps, email, password);
  return {
    id: user.id,
    email,
    password,
    organizationId: user.organization.id,
    role: 'owner',
    token: res.token,
    refreshToken: res.refresh_token,
  };
}

/** An active user of `organizationId` with `role` and extra grants, logged in. */
export async function createUser(
  deps: AppDeps,
  organizationId: string,
  opts: { role?: Exclude<Role, 'owner'>; permissions?: Permission[]; name?: string } = {},
): Promise<TestUser> {
  const email = uniqueEmail(opts.role ?? 'member');
  const em = deps.db.orm.em.fork();
  const user = createUserEntity(em, {
    id: newId('usr'),
    organization: em.getReference(Organization, organizationId),
    email,
    name: opts.name ?? 'Test User',
    passwordHash: await deps.passwords.hash(DEFAULT_PASSWORD),
    role: opts.role ?? 'member',
    status: 'active',
    permissions: initialPermissions(opts.role ?? 'member', opts.permissions ?? []),
  });
  await em.flush();
  const res = await loginAs(deps, email, DEFAULT_PASSWORD);
  return {
    id: user.id,
    email,
    password: DEFAULT_PASSWORD,
    organizationId,
    role: user.role,
    token: res.token,
    refreshToken: res.refresh_token,
  };
}
