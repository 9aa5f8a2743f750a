import type { AppDeps } from '../../kit/deps.js';
import { defineModule, type ModuleManifest } from '../../kit/module.js';
import { purgeExpiredSessionsJob, sendPasswordResetJob } from './auth.jobs.js';
import {
  AUTH_ORGANIZATION_ROWS,
  AUTH_TABLES,
  MikroOrmAuthRepository,
  type AuthRepository,
} from './auth.repository.js';
import { authRouter } from './auth.router.js';
import { ssoRouter } from './sso.router.js';
import { oidcHttpRoutes } from './sso-oidc.routes.js';
import { samlHttpRoutes } from './sso-saml.routes.js';
import { scimHttpRoutes } from './scim.routes.js';
import { ScimToken, ScimUser } from './scim.entity.js';
import { MikroOrmScimRepository, SCIM_ORGANIZATION_ROWS, type ScimRepository } from './scim.repository.js';
import { Migration20261207000040_scim } from './migrations/Migration20261207000040_scim.js';
import { Migration20261124000010_two_factor } from './migrations/Migration20261124000010_two_factor.js';
import { Migration20261126000010_account_security } from './migrations/Migration20261126000010_account_security.js';
import { PasswordResetToken } from './password-reset.entity.js';
import { LoginChallenge, RecoveryCode, TwoFactorCredential } from './two-factor.entity.js';
import { Migration20261207000030_sso } from './migrations/Migration20261207000030_sso.js';
import { SsoAssertion, SsoCode, SsoConnection, SsoDomain, SsoSignIn } from './sso.entity.js';
import {
  MikroOrmSsoRepository,
  SSO_ORGANIZATION_ROWS,
  SSO_TABLES,
  type SsoRepository,
} from './sso.repository.js';

/** What auth keeps per process (`deps.modules.auth`). */
export interface AuthRuntime {
  /** Every read and write of the module (auth.repository.ts). */
  readonly repository: AuthRepository;
  /** Every read and write of single sign-on (sso.repository.ts). */
  readonly sso: SsoRepository;
  /** Every read and write of SCIM provisioning (scim.repository.ts). */
  readonly scim: ScimRepository;
}

declare module '../../kit/deps.js' {
  interface ModuleRuntimes {
    auth: AuthRuntime;
  }
}

/** Sign-in, tokens and sign-up, on the identity entities of the core (server/access). */
// Typed by its name and runtime (not inferred): server/modules.ts checks them against `ModuleRuntimes` above.
export const authModule: ModuleManifest<'auth', AuthRuntime> = defineModule({
  name: 'auth',
  router: authRouter,
  // The organization's connection and SSO sign-in, mounted as `sso` (server/router.ts).
  routers: { sso: ssoRouter },
  create: (deps: AppDeps): AuthRuntime => ({
    repository: new MikroOrmAuthRepository(deps.db),
    sso: new MikroOrmSsoRepository(deps.db),
    scim: new MikroOrmScimRepository(deps.db),
  }),
  entities: [
    TwoFactorCredential,
    RecoveryCode,
    LoginChallenge,
    PasswordResetToken,
    SsoConnection,
    SsoDomain,
    SsoSignIn,
    SsoCode,
    SsoAssertion,
    ScimToken,
    ScimUser,
  ],
  // TOTP secrets, confirmed and pending (docs/security.md, "Encryption at rest").
  atRest: [
    { table: AUTH_TABLES.twoFactorCredentials, column: 'secret', key: 'secrets' },
    { table: AUTH_TABLES.twoFactorCredentials, column: 'pending_secret', key: 'secrets' },
    // OIDC client secrets (docs/sso.md).
    { table: SSO_TABLES.connections, column: 'client_secret', key: 'secrets' },
  ],
  migrations: [
    { name: 'Migration20261124000010_two_factor', class: Migration20261124000010_two_factor },
    {
      name: 'Migration20261126000010_account_security',
      class: Migration20261126000010_account_security,
    },
    { name: 'Migration20261207000030_sso', class: Migration20261207000030_sso },
    { name: 'Migration20261207000040_scim', class: Migration20261207000040_scim },
  ],
  jobs: [purgeExpiredSessionsJob, sendPasswordResetJob],
  // The IdPs' returns to the API (docs/sso.md, "Signing in"): no token, a redirect or a page.
  httpRoutes: [...oidcHttpRoutes, ...samlHttpRoutes, ...scimHttpRoutes],
  // Its tables, named from the entities (auth.repository.ts).
  organizationRows: {
    remove: [...SCIM_ORGANIZATION_ROWS, ...SSO_ORGANIZATION_ROWS, ...AUTH_ORGANIZATION_ROWS.remove],
  },
  notOwnedByUser: {
    TwoFactorCredential: 'the sign-in factor of the user it names, deleted with it',
    RecoveryCode: 'a sign-in factor of the user it names, deleted with it',
    LoginChallenge: 'a sign-in in progress of the user it names',
    PasswordResetToken: 'a password reset of the user it names, deleted with it',
    SsoCode: 'a single sign-on of the user it names, good for 60 seconds, deleted with it',
    ScimUser: 'what the directory says of the user it names (externalId, name parts), deleted with it',
  },
});
