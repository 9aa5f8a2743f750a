import { z } from 'zod';
import type { Em } from '../db/orm.js';
import { PLAN_IDS } from '../lib/plans.js';
import type { Organization } from './organization.entity.js';
import { UserSchema } from './user.entity.js';

/**
 * The organization as the API shows it (docs/organization.md, "The organization"): `GET /organization`'s body and
 * the `data.object` of `organization.updated`.
 */
export const ZOrganization = z
  .object({
    id: z.string().describe('Organization id, `org_…`'),
    name: z.string().describe('Display name'),
    plan: z.enum(PLAN_IDS).describe('The plan of the subscription'),
    owner_id: z.string().describe('The owner, `usr_…` (one per organization)'),
    users_count: z.number().int().describe('Users of the organization: invited, active and suspended'),
    created_at: z.string().describe('When the organization was created'),
  })
  .describe('An organization');
export type TOrganization = z.infer<typeof ZOrganization>;

const USERS = UserSchema.tableName;

/** The view of `org`: its owner (the first created, if ever more than one) and its users that are not deleted. */
export async function loadOrganizationView(em: Em, org: Organization): Promise<TOrganization> {
  const rows = await em.execute<{ owner_id: string | null; users_count: number }[]>(
    `select (select "id" from "${USERS}" where "organization_id" = ? and "role" = 'owner' and "deleted_at" is null
            order by "created_at" limit 1) as owner_id,
          (select count(*)::int from "${USERS}" where "organization_id" = ? and "deleted_at" is null) as users_count`,
    [org.id, org.id],
  );
  return {
    id: org.id,
    name: org.name,
    plan: org.plan,
    owner_id: rows[0]?.owner_id ?? '',
    users_count: Number(rows[0]?.users_count ?? 0),
    created_at: org.createdAt.toISOString(),
  };
}
