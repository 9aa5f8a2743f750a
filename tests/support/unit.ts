import { expect } from 'chai';
import type { Actor } from '../../server/access/actor.js';
import type { Permission } from '../../server/access/permissions.js';
import type { Role } from '../../server/access/user.entity.js';
import { AppError } from '../../server/lib/errors.js';
import { rejection } from './rejection.js';

/**
 * Helpers of the services' unit tests (an in-memory repository, no server): a caller, and the AppError a call must
 * reject with.
 */
let n = 0;

/** A signed-in caller of its own organization (or `organizationId`), with the role and permissions given. */
export function unitActor(
  opts: { role?: Actor['role']; organizationId?: string; permissions?: readonly Permission[] } = {},
): Actor {
  n += 1;
  return {
    ...actorOf(opts.organizationId ?? `org_${n}`, `usr_${n}`, opts.role ?? 'owner'),
    permissions: new Set(opts.permissions ?? []),
  };
}

/** The AppError `promise` rejects with (fails the test when it resolves or rejects with something else). */
export async function appRejection(promise: Promise<unknown>): Promise<AppError> {
  const err = await rejection(promise);
  expect(err).to.be.instanceOf(AppError);
  return err as AppError;
}

/** A caller `userId` of the organization with `role`, its every field set (no permission beyond the role's). */
export function actorOf(organizationId: string, userId: string, role: Role): Actor {
  return {
    userId,
    organizationId,
    plan: 'starter',
    sessionId: 'ses_test',
    role,
    email: `${userId}@example.com`,
    permissions: new Set(),
    user: {
      id: userId,
      email: `${userId}@example.com`,
      name: 'Test User',
      role,
      status: 'active',
      organization: { id: organizationId },
      permissions: [],
      twoFactorEnabled: false,
      lastLogin: null,
      createdAt: new Date(0),
    },
  };
}
