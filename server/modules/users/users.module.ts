import { defineModule } from '../../kit/module.js';
import { Migration20261121000010_users } from './migrations/Migration20261121000010_users.js';
import { UserInvitation } from './user-invitation.entity.js';
import { usersRouter } from './users.router.js';

export const usersModule = defineModule({
  name: 'users',
  router: usersRouter,
  entities: [UserInvitation],
  migrations: [{ name: 'Migration20261121000010_users', class: Migration20261121000010_users }],
  notOwnedByUser: {
    UserInvitation: 'the invitation of the user it names: revoked when that user is deleted',
  },
});
