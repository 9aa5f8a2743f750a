import { pageFields, pageRequest } from '../../lib/pagination.js';
import { API_KEY_SECRET_PREFIX, hashApiKeySecret } from '../../access/actor.js';
import { normalizePermissions } from '../../access/permissions.js';
import type { ActorContext } from '../../kit/deps.js';
import { randomToken } from '../../lib/crypto.js';
import { conflict, forbidden, notFound } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import type { ApiKey } from './api-key.entity.js';
import {
  DEFAULT_EXPIRES_IN_DAYS,
  MAX_KEYS_PER_ORGANIZATION,
  SECRET_PREFIX_LENGTH,
} from './api-keys.constants.js';
import { toApiKeyDto } from './api-keys.dto.js';
import { apiKeysRepositoryOf } from './api-keys.repository.js';
import type { TCreateApiKeyInput, TListApiKeysInput } from './api-keys.schema.js';

/** A live (not revoked) key of the caller's organization, or 404. */
async function findKeyOrThrow(ctx: ActorContext, id: string): Promise<ApiKey> {
  if (!isId('key', id)) throw notFound('API key');
  const key = await apiKeysRepositoryOf(ctx.deps).findLiveKey(ctx.em, ctx.actor, id);
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
  const repository = apiKeysRepositoryOf(ctx.deps);
  const key = await repository.transaction(ctx.em, async (tx) => {
    // Serialises creates of one organization, so the count below cannot be overshot.
    await repository.lockOrganization(tx, actor.organizationId);
    const live = await repository.countLiveKeys(tx, actor);
    if (live >= MAX_KEYS_PER_ORGANIZATION) {
      throw conflict(
        `An organization can have at most ${MAX_KEYS_PER_ORGANIZATION} API keys; revoke one first`,
      );
    }
    return repository.createKey(tx, {
      id: newId('key'),
      organizationId: actor.organizationId,
      createdById: actor.userId,
      now,
      name: input.name,
      prefix: secret.slice(0, SECRET_PREFIX_LENGTH),
      secretHash: hashApiKeySecret(secret),
      permissions,
      expiresAt: new Date(now.getTime() + (input.expires_in_days ?? DEFAULT_EXPIRES_IN_DAYS) * 86_400_000),
    });
  });
  return { success: true as const, api_key: toApiKeyDto(key), secret };
}

/** `GET /api-keys`: the organization's live keys, newest first (expired ones included until revoked). */
export async function listApiKeys(ctx: ActorContext, input: TListApiKeysInput) {
  const request = pageRequest(input);
  const page = await apiKeysRepositoryOf(ctx.deps).listLiveKeys(ctx.em, ctx.actor, request);
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
  if (!(await apiKeysRepositoryOf(ctx.deps).revokeKey(ctx.em, key.id, now))) throw notFound('API key');
  return { success: true as const, message: 'API key revoked', id: key.id };
}
