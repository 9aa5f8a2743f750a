import { z } from 'zod';
import { PLAN_IDS } from '../../lib/plans.js';
import { okResponse, ZPassword, zPathId } from '../../lib/schema.js';

/** The organization as the API shows it (docs/organization.md, "The organization"). */
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

export const ZOrganizationOutput = okResponse({ organization: ZOrganization });
export type TOrganizationOutput = z.infer<typeof ZOrganizationOutput>;

export const ZOrganizationName = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .describe('The organization’s name, 1 to 200 characters (leading and trailing spaces are dropped)');

export const ZUpdateOrganizationInput = z.strictObject({ name: ZOrganizationName });
export type TUpdateOrganizationInput = z.infer<typeof ZUpdateOrganizationInput>;

export const ZTransferOwnershipInput = z.strictObject({
  user_id: zPathId('usr', 'The new owner: an active admin of the organization'),
  password: ZPassword.describe('The current owner’s password'),
});
export type TTransferOwnershipInput = z.infer<typeof ZTransferOwnershipInput>;

export const ZTransferOwnershipOutput = okResponse({
  message: z.string(),
  organization: ZOrganization,
  previous_owner_id: z.string().describe('The former owner, now an admin'),
});
export type TTransferOwnershipOutput = z.infer<typeof ZTransferOwnershipOutput>;

export const ZDeleteOrganizationInput = z.strictObject({
  confirm: z.string().max(400).describe('The organization’s exact name, as `GET /organization` shows it'),
  password: ZPassword.describe('The owner’s password'),
});
export type TDeleteOrganizationInput = z.infer<typeof ZDeleteOrganizationInput>;

export const ZDeleteOrganizationOutput = okResponse({
  message: z.string(),
  id: z.string().describe('The deleted organization, `org_…`'),
  deletion_scheduled: z.string().describe('The time by which every row of the organization will be gone'),
});
export type TDeleteOrganizationOutput = z.infer<typeof ZDeleteOrganizationOutput>;
