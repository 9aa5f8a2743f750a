import { normalizePermissions } from '../../access/permissions.js';
import { iso } from '../../lib/time.js';
import type { ApiKey } from './api-key.entity.js';
import type { TApiKey } from './api-keys.schema.js';

export function toApiKeyDto(k: ApiKey): TApiKey {
  return {
    id: k.id,
    name: k.name,
    prefix: k.prefix,
    permissions: normalizePermissions(k.permissions),
    created_by: k.createdBy.id,
    created_at: iso(k.createdAt)!,
    expires_at: iso(k.expiresAt)!,
    last_used_at: iso(k.lastUsedAt) ?? null,
  };
}
