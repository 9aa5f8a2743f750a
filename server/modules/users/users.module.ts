import { defineModule } from '../../kit/module.js';
import { Migration20261121000010_users } from './migrations/Migration20261121000010_users.js';
import { Migration20261127000010_users_email_per_organization } from './migrations/Migration20261127000010_users_email_per_organization.js';
import { UserInvitation } from './user-invitation.entity.js';
import { usersRouter } from './users.router.js';

export const usersModule = defineModule({
  name: 'users',
  router: usersRouter,
  entities: [UserInvitation],
  migrations: [
    { name: 'Migration20261121000010_users', class: Migration20261121000010_users },
    {
      name: 'Migration20261127000010_users_email_per_organization',
      class: Migration20261127000010_users_email_per_organization,
    },
  ],
  // A pending invitation of a deleted organization can no longer be accepted.
  onOrganizationDeleted: async (tx, organization, now) => {
    await tx.execute(
      `update "user_invitations" set "revoked_at" = ? where "organization_id" = ? and "accepted_at" is null and "revoked_at" is null`,
      [now, organization.id],
    );
  },
  organizationRows: { remove: [{ table: 'user_invitations' }] },
  notOwnedByUser: {
    UserInvitation: 'the invitation of the user it names: revoked when that user is deleted',
  },
});
