// Test tier: server
import { expect } from 'chai';
import {
  AuthenticationError,
  PermissionError,
  createClient,
  type IssuedTokens,
} from '@cloud-platform/client';
import { Organization } from '../../server/access/organization.entity.js';
import { randomToken, sha256Hex } from '../../server/lib/crypto.js';
import { newId } from '../../server/lib/ids.js';
import { authRepositoryOf } from '../../server/modules/auth/auth.repository.js';
import { ssoRepositoryOf } from '../../server/modules/auth/sso.repository.js';
import { createOrg, createUser, DEFAULT_PASSWORD } from '../support/factories.js';
import { rejection } from '../support/rejection.js';
import { sharedServer, type TestServer } from '../support/server.js';

/**
 * client-sdk/README.md, "Options": `loginWithSsoCode(code)` exchanges the one-time code of a single sign-on
 * (`sso.token`) and keeps the pair as `login()` does.
 */
describe('client SDK: single sign-on', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** A one-time code of `userId`, as a finished sign-in leaves it (60 s, once). */
  async function ssoCode(userId: string): Promise<string> {
    const code = randomToken('ssoc_', 256);
    const sso = ssoRepositoryOf(s.deps);
    const now = s.deps.clock.now();
    await sso.transaction(s.deps.db.orm.em.fork(), async (tx) => {
      const user = await authRepositoryOf(s.deps).userWithOrganization(tx, userId);
      sso.createCode(tx, {
        id: newId('ssc'),
        now,
        user,
        codeHash: sha256Hex(code),
        expiresAt: new Date(now.getTime() + 60_000),
      });
    });
    return code;
  }

  it('loginWithSsoCode() stores the pair, hands it to onTokens and answers the login body; a used code is refused', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const member = await createUser(s.deps, owner.organizationId);
    const code = await ssoCode(member.id);

    const issued: IssuedTokens[] = [];
    const client = createClient({ baseUrl: s.baseUrl, onTokens: (t) => void issued.push(t) });
    const res = await client.loginWithSsoCode(code);
    expect(res.user.id).to.equal(member.id);
    expect(res.token_type).to.equal('Bearer');
    expect(client.getTokens()).to.deep.equal({ token: res.token, refreshToken: res.refresh_token });
    expect(issued).to.have.length(1);
    expect(issued[0]).to.include({ token: res.token, refreshToken: res.refresh_token });
    expect((await client.auth.me.query()).user.email).to.equal(member.email);

    const again = await rejection(createClient({ baseUrl: s.baseUrl }).loginWithSsoCode(code));
    expect(again).to.be.instanceOf(AuthenticationError);
    expect((again as AuthenticationError).code).to.equal('INVALID_CREDENTIALS');
  });

  it('a password login refused by enforced single sign-on rejects with PermissionError SSO_REQUIRED', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const member = await createUser(s.deps, owner.organizationId);
    const sso = ssoRepositoryOf(s.deps);
    await sso.transaction(s.deps.db.orm.em.fork(), async (tx) => {
      sso.createConnection(tx, {
        id: newId('sso'),
        now: s.deps.clock.now(),
        organizationId: owner.organizationId,
        protocol: 'saml',
        issuer: null,
        clientId: null,
        clientSecret: null,
        idpEntityId: 'https://idp.example.test',
        idpSsoUrl: 'https://idp.example.test/sso',
        idpCertificate: null,
        defaultRole: 'member',
        enforced: true,
      });
    });
    const err = await rejection(createClient({ baseUrl: s.baseUrl }).login(member.email, DEFAULT_PASSWORD));
    expect(err).to.be.instanceOf(PermissionError);
    expect((err as PermissionError).code).to.equal('SSO_REQUIRED');
    expect((err as PermissionError).status).to.equal(403);
    // Not on an Enterprise plan any more: passwords work again.
    await s.deps.db.orm.em.fork().nativeUpdate(Organization, { id: owner.organizationId }, { plan: 'pro' });
    const res = await createClient({ baseUrl: s.baseUrl }).login(member.email, DEFAULT_PASSWORD);
    expect(res.user.id).to.equal(member.id);
  });
});
