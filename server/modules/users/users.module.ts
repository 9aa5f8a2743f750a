import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { Migration20261121000010_users } from './migrations/Migration20261121000010_users.js';
import { Migration20261127000010_users_email_per_organization } from './migrations/Migration20261127000010_users_email_per_organization.js';
import { UserInvitation } from './user-invitation.entity.js';
import {
  MikroOrmUsersRepository,
  revokeOrganizationInvitations,
  USERS_TABLES,
  type UsersRepository,
} from './users.repository.js';
import { usersRouter } from './users.router.js';

/** What users keeps per process (`deps.modules.users`). */
export interface UsersRuntime {
  /** Every read and write of the module's tables (users.repository.ts). */
  readonly repository: UsersRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    users: UsersRuntime;
  }
}

// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const usersModule: ModuleManifest<'users', UsersRuntime> = defineModule({
  name: 'users',
  router: usersRouter,
  create: (deps: AppDeps): UsersRuntime => ({ repository: new MikroOrmUsersRepository(deps.db) }),
  entities: [UserInvitation],
  migrations: [
    { name: 'Migration20261121000010_users', class: Migration20261121000010_users },
    {
      name: 'Migration20261127000010_users_email_per_organization',
      class: Migration20261127000010_users_email_per_organization,
    },
  ],
  // A pending invitation of a deleted organization can no longer be accepted.
  onOrganizationDeleted: (tx, organization, now) => revokeOrganizationInvitations(tx, organization.id, now),
  // Its table, named from the entity (users.repository.ts).
  organizationRows: { remove: [{ table: USERS_TABLES.invitations }] },
  notOwnedByUser: {
    UserInvitation: 'the invitation of the user it names: revoked when that user is deleted',
  },
});
