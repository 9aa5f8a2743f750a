import { LockMode } from '@mikro-orm/core';
import { pageFields, pageRequest } from '../../lib/pagination.js';
import { API_KEY_SECRET_PREFIX, hashApiKeySecret } from '../../access/actor.js';
import { Organization } from '../../access/organization.entity.js';
import { normalizePermissions } from '../../access/permissions.js';
import { inOrganization } from '../../access/scope.js';
import { User } from '../../access/user.entity.js';
import { findPage } from '../../db/pagination.js';
import type { ActorContext } from '../../kit/deps.js';
import { randomToken } from '../../lib/crypto.js';
import { conflict, forbidden, notFound } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { ApiKey } from './api-key.entity.js';
import {
  DEFAULT_EXPIRES_IN_DAYS,
  MAX_KEYS_PER_ORGANIZATION,
  SECRET_PREFIX_LENGTH,
} from './api-keys.constants.js';
import { toApiKeyDto } from './api-keys.dto.js';
import type { TCreateApiKeyInput, TListApiKeysInput } from './api-keys.schema.js';

/** A live (not revoked) key of the caller's organization, or 404. */
async function findKeyOrThrow(ctx: ActorContext, id: string): Promise<ApiKey> {
  if (!isId('key', id)) throw notFound('API key');
  const key = await ctx.em.findOne(ApiKey, { id, ...inOrganization(ctx.actor), revokedAt: null });
  if (!key) throw notFound('API key');
  return key;
}

/**
 * `POST /api-keys`: a new key acting as the caller with the listed permissions, each of which the caller must hold
 * (403 otherwise). The secret is returned here only; what is stored is its SHA-256.
 */
export async function createApiKey(ctx: ActorContext, input: TCreateApiKeyInput) {
  const { actor } = ctx;
  const permissions = normalizePermissions(input.permissions);
  const missing = permissions.filter((p) => !actor.permissions.has(p));
  if (missing.length > 0) {
    throw forbidden(`A key cannot be granted permissions you do not hold: ${missing.join(', ')}`);
  }
  const secret = randomToken(API_KEY_SECRET_PREFIX, 256);
  const now = ctx.deps.clock.now();
  const key = await ctx.em.transactional(async (tx) => {
    // Serialises creates of one organization, so the count below cannot be overshot.
    await tx.findOneOrFail(Organization, actor.organizationId, { lockMode: LockMode.PESSIMISTIC_WRITE });
    const live = await tx.count(ApiKey, { ...inOrganization(actor), revokedAt: null });
    if (live >= MAX_KEYS_PER_ORGANIZATION) {
      throw conflict(
        `An organization can have at most ${MAX_KEYS_PER_ORGANIZATION} API keys; revoke one first`,
      );
    }
    return tx.create(ApiKey, {
      id: newId('key'),
      organization: tx.getReference(Organization, actor.organizationId),
      createdBy: tx.getReference(User, actor.userId),
      name: input.name,
      prefix: secret.slice(0, SECRET_PREFIX_LENGTH),
      secretHash: hashApiKeySecret(secret),
      permissions,
      expiresAt: new Date(now.getTime() + (input.expires_in_days ?? DEFAULT_EXPIRES_IN_DAYS) * 86_400_000),
      lastUsedAt: null,
      revokedAt: null,
      createdAt: now,
      updatedAt: now,
    });
  });
  return { success: true as const, api_key: toApiKeyDto(key), secret };
}

/** `GET /api-keys`: the organization's live keys, newest first (expired ones included until revoked). */
export async function listApiKeys(ctx: ActorContext, input: TListApiKeysInput) {
  const request = pageRequest(input);
  const scope = inOrganization(ctx.actor);
  const page = await findPage(ctx.em, ApiKey, { ...scope, revokedAt: null }, request, {
    counted: { spec: { list: 'api_keys', scope: 'organization', dims: [] }, filter: scope },
  });
  return {
    success: true as const,
    api_keys: page.items.map(toApiKeyDto),
    ...pageFields(request, page),
  };
}

export async function getApiKey(ctx: ActorContext, id: string) {
  return { success: true as const, api_key: toApiKeyDto(await findKeyOrThrow(ctx, id)) };
}

/** `DELETE /api-keys/:id`: revoked at once, in every process (the bearer lookup reads it on every request). */
export async function revokeApiKey(ctx: ActorContext, id: string) {
  const key = await findKeyOrThrow(ctx, id);
  const now = ctx.deps.clock.now();
  const n = await ctx.em.nativeUpdate(
    ApiKey,
    { id: key.id, revokedAt: null },
    { revokedAt: now, updatedAt: now },
  );
  if (n === 0) throw notFound('API key');
  return { success: true as const, message: 'API key revoked', id: key.id };
}
