// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { newId } from '../../../server/lib/ids.js';
import { toAppError } from '../../../server/trpc/init.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { ssoRepositoryOf } from '../../../server/modules/auth/sso.repository.js';
import { authRepositoryOf } from '../../../server/modules/auth/auth.repository.js';
import { createOrg } from '../../support/factories.js';
import { sharedServer } from '../../support/server.js';
import { ssoSignInSetUp } from './sso-sign-in.fixtures.js';

/**
 * What the single sign-on services rely on of the MikroORM repository (server/modules/auth/sso.repository.ts): the
 * domain list kept across changes, one organization per verified domain, single use of states and codes under
 * concurrency, the replay cache per organization.
 */
describe('SsoRepository (MikroORM)', function () {
  this.timeout(60_000);
  let deps: AppDeps;
  before(async () => {
    deps = (await sharedServer()).deps;
  });

  const repo = () => ssoRepositoryOf(deps);
  const tx = <R>(
    work: (tx: Parameters<Parameters<ReturnType<typeof repo>['transaction']>[1]>[0]) => Promise<R>,
  ) => repo().transaction(repo().fork(), work);
  const domainName = () => `d-${randomBytes(5).toString('hex')}.test`;
  let tokens = 0;
  const newToken = () => `token-${++tokens}`;

  it('replaceDomains keeps a kept domain’s token and verification, adds new ones pending, drops the others', async () => {
    const org = await createOrg(deps, { plan: 'enterprise' });
    const [a, b, c] = [domainName(), domainName(), domainName()];
    const now = deps.clock.now();
    await tx((t) => repo().replaceDomains(t, org.organizationId, [a, b], now, newToken));
    expect(await tx((t) => repo().markDomainVerified(t, org.organizationId, a, now))).to.equal(true);
    const before = await repo().listDomains(repo().fork(), org.organizationId);
    const list = await tx((t) => repo().replaceDomains(t, org.organizationId, [a, c, c], now, newToken));
    expect(list.map((d) => d.domain)).to.deep.equal([a, c].sort());
    const kept = list.find((d) => d.domain === a)!;
    expect(kept.token).to.equal(before.find((d) => d.domain === a)!.token);
    expect(kept.verifiedAt).to.not.equal(null);
    expect(list.find((d) => d.domain === c)!.verifiedAt).to.equal(null);
    expect((await repo().listDomains(repo().fork(), org.organizationId)).map((d) => d.domain)).to.deep.equal(
      [a, c].sort(),
    );
    expect(await tx((t) => repo().markDomainVerified(t, org.organizationId, b, now))).to.equal(false);
    await tx((t) => repo().replaceDomains(t, org.organizationId, [], now, newToken));
    expect(await repo().listDomains(repo().fork(), org.organizationId)).to.deep.equal([]);
  });

  it('a domain verified by one organization: another may claim it pending, but verifying it is a 409 CONFLICT', async () => {
    const first = await createOrg(deps, { plan: 'enterprise' });
    const second = await createOrg(deps, { plan: 'enterprise' });
    const { domain } = await ssoSignInSetUp(deps, first.organizationId);
    const now = deps.clock.now();
    await tx((t) => repo().replaceDomains(t, second.organizationId, [domain], now, newToken));
    expect(await repo().domainVerifiedElsewhere(repo().fork(), domain, second.organizationId)).to.equal(
      first.organizationId,
    );
    expect(await repo().domainVerifiedElsewhere(repo().fork(), domain, first.organizationId)).to.equal(null);
    let caught: unknown;
    await tx((t) => repo().markDomainVerified(t, second.organizationId, domain, now)).catch(
      (err: unknown) => {
        caught = err;
      },
    );
    expect(toAppError(caught).code).to.equal('CONFLICT');
    const route = await repo().findSignInRouteByEmailDomain(repo().fork(), domain);
    expect(route?.organizationId).to.equal(first.organizationId);
    expect(await repo().isVerifiedDomainOf(repo().fork(), second.organizationId, domain)).to.equal(false);
  });

  it('routes only a verified domain with a connection; deleting the connection drops its domains', async () => {
    const org = await createOrg(deps, { plan: 'enterprise' });
    const pending = await ssoSignInSetUp(deps, org.organizationId, { verified: false });
    expect(await repo().findSignInRouteByEmailDomain(repo().fork(), pending.domain)).to.equal(null);
    const other = await createOrg(deps, { plan: 'enterprise' });
    const bare = await ssoSignInSetUp(deps, other.organizationId, { connection: false });
    expect(await repo().findSignInRouteByEmailDomain(repo().fork(), bare.domain)).to.equal(null);

    expect(await tx((t) => repo().deleteConnection(t, org.organizationId))).to.equal(true);
    expect(await repo().listDomains(repo().fork(), org.organizationId)).to.deep.equal([]);
    expect(await tx((t) => repo().deleteConnection(t, org.organizationId))).to.equal(false);
  });

  it('a state and a code are each used once, however many uses race', async () => {
    const org = await createOrg(deps, { plan: 'enterprise' });
    const now = deps.clock.now();
    const stateHash = randomBytes(32).toString('hex');
    await tx(async (t) => {
      repo().createSignIn(t, {
        id: newId('ssi'),
        now,
        organizationId: org.organizationId,
        stateHash,
        protocol: 'oidc',
        nonce: 'n',
        codeVerifier: 'v',
        returnTo: null,
        requestId: null,
        expiresAt: new Date(now.getTime() + 60_000),
      });
      await repo().flush(t);
    });
    const states = await Promise.all(
      Array.from({ length: 4 }, () => tx((t) => repo().consumeSignIn(t, stateHash, now))),
    );
    expect(states.filter((x) => x !== null)).to.have.length(1);
    const won = states.find((x) => x !== null)!;
    expect({ nonce: won.nonce, codeVerifier: won.codeVerifier }).to.deep.equal({
      nonce: 'n',
      codeVerifier: 'v',
    });

    const codeHash = randomBytes(32).toString('hex');
    const user = await authRepositoryOf(deps).getUser(repo().fork(), org.id);
    await tx(async (t) => {
      const u = await authRepositoryOf(deps).userWithOrganization(t, user.id);
      repo().createCode(t, {
        id: newId('ssc'),
        now,
        user: u,
        codeHash,
        expiresAt: new Date(now.getTime() + 60_000),
      });
      await repo().flush(t);
    });
    const late = new Date(now.getTime() + 60_000);
    expect(await tx((t) => repo().consumeCode(t, codeHash, late)), 'expired at 60 s').to.equal(null);
    const codes = await Promise.all(
      Array.from({ length: 4 }, () => tx((t) => repo().consumeCode(t, codeHash, now))),
    );
    expect(codes.filter((x) => x !== null)).to.have.length(1);
    expect(codes.find((x) => x !== null)!.user.id).to.equal(org.id);
  });

  it('remembers an assertion per organization: a second sighting is a replay, another organization’s is not', async () => {
    const a = await createOrg(deps, { plan: 'enterprise' });
    const b = await createOrg(deps, { plan: 'enterprise' });
    const id = `_${randomBytes(8).toString('hex')}`;
    const now = deps.clock.now();
    const until = new Date(now.getTime() + 60_000);
    const seen = await Promise.all([
      tx((t) => repo().rememberAssertion(t, a.organizationId, id, until, now)),
      tx((t) => repo().rememberAssertion(t, a.organizationId, id, until, now)),
    ]);
    expect(seen.sort()).to.deep.equal([false, true]);
    expect(await tx((t) => repo().rememberAssertion(t, b.organizationId, id, until, now))).to.equal(true);
  });
});
