import type { SecurityFixture } from '../../support/security-fixtures.js';

/** A live key of the other organization, for the procedures that take a key id. */
const otherOrgKey: SecurityFixture = async ({ s, other }) => {
  const { api_key } = await s
    .caller(other.token)
    .apiKeys.create({ name: 'Other org', permissions: ['vpn:read'] });
  return { id: api_key.id };
};

export const apiKeysSecurityFixtures: Record<string, SecurityFixture> = {
  'apiKeys.get': otherOrgKey,
  'apiKeys.revoke': otherOrgKey,
};
