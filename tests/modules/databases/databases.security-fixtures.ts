import type { FixtureContext, SecurityFixture } from '../../support/security-fixtures.js';

/** A database of the other organization (created through its owner), for the procedures that take a database id. */
async function otherOrgDatabase({ s, other }: FixtureContext): Promise<string> {
  const { database } = await s
    .caller(other.token)
    .databases.create({ name: 'other-org', engine: 'postgresql' });
  return database.id;
}

/** Security fixtures of the databases module (see tests/support/security-fixtures.ts). */
export const databasesSecurityFixtures: Record<string, SecurityFixture> = {
  'databases.get': async (ctx) => ({ id: await otherOrgDatabase(ctx) }),
  'databases.update': async (ctx) => ({ id: await otherOrgDatabase(ctx), backup_enabled: false }),
  'databases.delete': async (ctx) => ({ id: await otherOrgDatabase(ctx) }),
  'databases.resetPassword': async (ctx) => ({ id: await otherOrgDatabase(ctx) }),
  'databases.cancelDeletion': async (ctx) => ({ id: await otherOrgDatabase(ctx) }),
  'databases.backups.list': async (ctx) => ({ id: await otherOrgDatabase(ctx) }),
  'databases.backups.create': async (ctx) => ({
    id: await otherOrgDatabase(ctx),
    name: 'before the upgrade',
  }),
};
