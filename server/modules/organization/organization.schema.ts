import { z } from 'zod';
import { ZOrganization, type TOrganization } from '../../access/organization.dto.js';
import { okResponse, ZPassword, zPathId } from '../../lib/schema.js';

// The organization as the API shows it, also the `data.object` of `organization.updated` (server/access/).
export { ZOrganization, type TOrganization };

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
