import { defineModule } from '../../kit/module.js';
import { purgeExpiredSessionsJob, sendPasswordResetJob } from './auth.jobs.js';
import { authRouter } from './auth.router.js';
import { Migration20261124000010_two_factor } from './migrations/Migration20261124000010_two_factor.js';
import { Migration20261126000010_account_security } from './migrations/Migration20261126000010_account_security.js';
import { PasswordResetToken } from './password-reset.entity.js';
import { LoginChallenge, RecoveryCode, TwoFactorCredential } from './two-factor.entity.js';

/** Sign-in, tokens and sign-up, on the identity entities of the core (server/access). */
/** The rows of an organization's users, in tables keyed by user (organizationRows). */
const ORGANIZATION_USERS = `"user_id" in (select "id" from "users" where "organization_id" = ?)`;

export const authModule = defineModule({
  name: 'auth',
  router: authRouter,
  entities: [TwoFactorCredential, RecoveryCode, LoginChallenge, PasswordResetToken],
  // TOTP secrets, confirmed and pending (docs/security.md, "Encryption at rest").
  atRest: [
    { table: 'two_factor_credentials', column: 'secret', key: 'twoFactor' },
    { table: 'two_factor_credentials', column: 'pending_secret', key: 'twoFactor' },
  ],
  migrations: [
    { name: 'Migration20261124000010_two_factor', class: Migration20261124000010_two_factor },
    {
      name: 'Migration20261126000010_account_security',
      class: Migration20261126000010_account_security,
    },
  ],
  jobs: [purgeExpiredSessionsJob, sendPasswordResetJob],
  organizationRows: {
    remove: [
      { table: 'login_challenges', where: ORGANIZATION_USERS },
      { table: 'recovery_codes', where: ORGANIZATION_USERS },
      { table: 'two_factor_credentials', where: ORGANIZATION_USERS },
      { table: 'password_reset_tokens', where: ORGANIZATION_USERS },
    ],
  },
  notOwnedByUser: {
    TwoFactorCredential: 'the sign-in factor of the user it names, deleted with it',
    RecoveryCode: 'a sign-in factor of the user it names, deleted with it',
    LoginChallenge: 'a sign-in in progress of the user it names',
    PasswordResetToken: 'a password reset of the user it names, deleted with it',
  },
});
