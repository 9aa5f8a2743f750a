import { expect } from 'chai';
import type { Actor } from '../../server/access/actor.js';
import type { Permission } from '../../server/access/permissions.js';
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
    userId: `usr_${n}`,
    organizationId: opts.organizationId ?? `org_${n}`,
    plan: 'free',
    sessionId: 'ses',
    role: opts.role ?? 'owner',
    email: `u${n}@example.com`,
    permissions: new Set(opts.permissions ?? []),
    user: {},
  } as unknown as Actor;
}

/** The AppError `promise` rejects with (fails the test when it resolves or rejects with something else). */
export async function appRejection(promise: Promise<unknown>): Promise<AppError> {
  const err = await rejection(promise);
  expect(err).to.be.instanceOf(AppError);
  return err as AppError;
}
