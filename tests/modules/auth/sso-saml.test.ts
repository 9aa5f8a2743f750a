// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { User } from '../../../server/access/user.entity.js';
import { SsoAssertion, SsoCode } from '../../../server/modules/auth/sso.entity.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { startDnsServer, type TestDnsServer } from '../../support/dns-server.js';
import { http } from '../../support/http.js';
import {
  SamlTestIdp,
  parseRedirectRequest,
  testKeyPair,
  type ParsedAuthnRequest,
  type ResponseOptions,
  type Wrapping,
} from '../../support/saml-idp.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/**
 * SAML sign-in end to end (docs/sso.md, "SAML" and "Signing in"): an Enterprise organization configures its IdP by
 * metadata through `PUT /v1/organization/sso`, verifies its domain against a DNS server of the test's own, and its
 * people sign in through the test IdP (tests/support/saml-idp.ts): `POST /v1/auth/sso/start` → the IdP's URL
 * (HTTP-Redirect binding) → the Response posted to the ACS → a code → `POST /v1/auth/sso/token` → `/auth/me`. Every
 * spoiled response is refused with its code, and creates no user, no code and no remembered assertion.
 */

const PUBLIC_BASE_URL = 'https://api.example.test';
const ACS_URL = `${PUBLIC_BASE_URL}/v1/auth/sso/saml/acs`;

interface Acs {
  status: number;
  location: string | null;
  body: string;
}

describe('SSO SAML sign-in (HTTP)', function () {
  this.timeout(60_000);
  let dns: TestDnsServer;
  let s: TestServer;
  let owner: TestUser;
  let spEntityId: string;
  const idp = new SamlTestIdp();
  const domain = `saml-${randomBytes(5).toString('hex')}.example.test`;
  /** The command-line client's listener the sign-ins return to. */
  const returnTo = 'http://127.0.0.1:8976/callback';

  before(async () => {
    dns = await startDnsServer();
    s = await startTestServer({ env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL } });
    owner = await createOrg(s.deps, { plan: 'enterprise' });
    const put = await http(s.baseUrl, 'PUT', '/v1/organization/sso', {
      token: owner.token,
      body: { protocol: 'saml', metadata_xml: idp.metadataXml(), domains: [domain] },
    });
    expect(put.status, put.text).to.equal(200);
    expect(put.body.sso).to.deep.include({ protocol: 'saml', idp_entity_id: idp.entityId, acs_url: ACS_URL });
    spEntityId = put.body.sso.entity_id;
    expect(spEntityId).to.equal(`${PUBLIC_BASE_URL}/v1/auth/sso/saml/metadata/${owner.organizationId}`);
    const { record } = put.body.sso.domains[0].verification;
    dns.txt.set(record.name, [record.value]);
    const verified = await http(s.baseUrl, 'POST', `/v1/organization/sso/domains/${domain}/verify`, {
      token: owner.token,
    });
    expect(verified.status, verified.text).to.equal(200);
  });

  after(async () => {
    await s?.close();
    await dns?.close();
  });

  /** `POST /auth/sso/start` for `email`, and the AuthnRequest its URL carries. */
  async function start(email: string, opts: { returnTo?: string | null } = {}): Promise<ParsedAuthnRequest> {
    const body: Record<string, string> = { email };
    if (opts.returnTo !== null) body.return_to = opts.returnTo ?? returnTo;
    const res = await http(s.baseUrl, 'POST', '/v1/auth/sso/start', { body });
    expect(res.status, res.text).to.equal(200);
    const url = String(res.body.authorization_url);
    expect(url.startsWith(`${idp.ssoUrl}?`), url).to.equal(true);
    const request = parseRedirectRequest(url);
    expect(request.acsUrl).to.equal(ACS_URL);
    expect(request.issuer).to.equal(spEntityId);
    expect(request.relayState).to.be.a('string').and.not.equal('');
    return request;
  }

  /** The browser's form POST to the ACS (HTTP-POST binding), redirects not followed. */
  async function postAcs(fields: Record<string, string>): Promise<Acs> {
    const res = await fetch(`${s.baseUrl}/v1/auth/sso/saml/acs`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
      redirect: 'manual',
    });
    return { status: res.status, location: res.headers.get('location'), body: await res.text() };
  }

  /** The IdP's answer to `request`, posted with its RelayState. */
  function answer(request: ParsedAuthnRequest, opts: ResponseOptions): Promise<Acs> {
    return postAcs({
      SAMLResponse: idp.response(request, spEntityId, opts),
      RelayState: request.relayState!,
    });
  }

  /** The code of a redirect to return_to (`?code=`), or the failure it carries (`?error=`). */
  function landed(acs: Acs): URLSearchParams {
    expect(acs.status, acs.body).to.equal(302);
    const url = new URL(acs.location!);
    expect(`${url.origin}${url.pathname}`).to.equal(returnTo);
    return url.searchParams;
  }

  async function rows(email: string) {
    const em = s.deps.db.orm.em.fork();
    return {
      users: await em.count(User, { email }),
      codes: await em.count(SsoCode, { organization: owner.organizationId }),
      assertions: await em.count(SsoAssertion, { organization: owner.organizationId }),
    };
  }

  async function exchange(code: string) {
    return http(s.baseUrl, 'POST', '/v1/auth/sso/token', { body: { code } });
  }

  it('signs a new person in just in time: start, IdP, ACS, code, token, /auth/me', async () => {
    const email = `ada-${randomBytes(3).toString('hex')}@${domain}`;
    const request = await start(email);
    const acs = await answer(request, { email, attributes: { firstName: 'Ada', lastName: 'Lovelace' } });
    const code = landed(acs).get('code');
    expect(code, acs.location!).to.be.a('string').and.not.equal('');
    expect(landed(acs).get('error')).to.equal(null);

    const token = await exchange(code!);
    expect(token.status, token.text).to.equal(200);
    expect(token.body).to.include({ success: true, token_type: 'Bearer' });
    expect(token.body.user).to.deep.include({ email, role: 'member', organization_id: owner.organizationId });

    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: token.body.token });
    expect(me.status).to.equal(200);
    expect(me.body.user).to.deep.include({ email, role: 'member', status: 'active', name: 'Ada Lovelace' });
    expect((await exchange(code!)).status).to.equal(401);
  });

  it('shows a page with the code when the sign-in has no return_to', async () => {
    const email = `page-${randomBytes(3).toString('hex')}@${domain}`;
    const request = await start(email, { returnTo: null });
    const acs = await answer(request, { email });
    expect(acs.status, acs.body).to.equal(200);
    expect(acs.body).to.include('Signed in');
    const code = /<code>(ssoc_[A-Za-z0-9_-]+)<\/code>/.exec(acs.body)?.[1];
    expect(code, acs.body).to.be.a('string');
    expect((await exchange(code!)).status).to.equal(200);
  });

  it('serves the SP metadata of an organization with a SAML connection, 404 otherwise', async () => {
    const res = await fetch(`${s.baseUrl}/v1/auth/sso/saml/metadata/${owner.organizationId}`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/xml/);
    const xml = await res.text();
    expect(xml).to.include(`entityID="${spEntityId}"`);
    expect(xml).to.include(`Location="${ACS_URL}"`);
    const other = await createOrg(s.deps, { plan: 'enterprise' });
    for (const id of [other.organizationId, 'org_nope']) {
      const missing = await http(s.baseUrl, 'GET', `/v1/auth/sso/saml/metadata/${id}`);
      expect(missing.status).to.equal(404);
      expect(missing.body.error).to.deep.include({ code: 'NOT_FOUND' });
    }
  });

  describe('refusals: the documented code, and nothing created', () => {
    const cases: [string, (email: string) => ResponseOptions][] = [
      ['an unsigned response', () => ({ sign: 'none' })],
      ['a response signed as a whole only', () => ({ sign: 'response' })],
      ['an assertion signed by another key', () => ({ signingKey: testKeyPair('other') })],
      ['another audience', () => ({ audience: 'https://sp.other.test/metadata' })],
      ['another recipient', () => ({ recipient: 'https://evil.example.test/acs' })],
      ['an expired assertion', () => ({ notOnOrAfter: new Date(Date.now() - 5 * 60_000) })],
      ['another issuer', () => ({ issuer: 'https://evil.example.test/idp' })],
      ...(
        [
          'signed-inside-evil',
          'evil-sibling-before',
          'evil-sibling-after',
          'signed-in-extensions',
          'signed-in-signature-object',
          'evil-same-id',
          'response-in-extensions',
        ] as Wrapping[]
      ).map((wrap): [string, (email: string) => ResponseOptions] => [
        `a wrapped assertion (${wrap})`,
        () => ({
          wrap,
          sign: wrap === 'response-in-extensions' ? 'both' : 'assertion',
          email: `victim@${domain}`,
        }),
      ]),
    ];
    for (const [what, opts] of cases) {
      it(`refuses ${what}: SSO_ASSERTION_INVALID`, async () => {
        const email = `evil-${randomBytes(3).toString('hex')}@${domain}`;
        const before = await rows(email);
        const request = await start(email);
        // A wrapped response's unsigned assertion names `email`: were it believed, that user would be created.
        const acs = await answer(request, { email, evilEmail: email, ...opts(email) });
        const params = landed(acs);
        expect(params.get('error'), acs.location!).to.equal('SSO_ASSERTION_INVALID');
        expect(params.get('error_description')).to.be.a('string').and.not.equal('');
        expect(params.get('code')).to.equal(null);
        expect(await rows(email)).to.deep.equal({ ...before, users: 0 });
      });
    }

    it('refuses a response to another sign-in’s request (InResponseTo): SSO_ASSERTION_INVALID', async () => {
      const email = `other-${randomBytes(3).toString('hex')}@${domain}`;
      const before = await rows(email);
      const mine = await start(email);
      const theirs = await start(email);
      const acs = await postAcs({
        SAMLResponse: idp.response(theirs, spEntityId, { email }),
        RelayState: mine.relayState!,
      });
      expect(landed(acs).get('error')).to.equal('SSO_ASSERTION_INVALID');
      expect(await rows(email)).to.deep.equal({ ...before, users: 0 });
    });

    it('refuses a replayed assertion ID: SSO_ASSERTION_INVALID', async () => {
      const email = `replay-${randomBytes(3).toString('hex')}@${domain}`;
      const assertionId = `_${randomBytes(16).toString('hex')}`;
      const first = await start(email);
      const ok = landed(await answer(first, { email, assertionId }));
      expect(ok.get('code')).to.be.a('string');
      const before = await rows(email);
      expect(before.users).to.equal(1);

      // The same assertion (its ID) again, in answer to a new request.
      const second = await start(email);
      const acs = await answer(second, { email, assertionId });
      const params = landed(acs);
      expect(params.get('error')).to.equal('SSO_ASSERTION_INVALID');
      expect(params.get('error_description')).to.match(/replay|already/i);
      expect(await rows(email)).to.deep.equal(before);
    });

    it('refuses the same post twice (its RelayState is used up): SSO_STATE_INVALID', async () => {
      const email = `twice-${randomBytes(3).toString('hex')}@${domain}`;
      const request = await start(email);
      const fields = {
        SAMLResponse: idp.response(request, spEntityId, { email }),
        RelayState: request.relayState!,
      };
      expect(landed(await postAcs(fields)).get('code')).to.be.a('string');
      const before = await rows(email);
      const again = await postAcs(fields);
      expect(again.status).to.equal(400);
      expect(again.body).to.include('SSO_STATE_INVALID');
      expect(await rows(email)).to.deep.equal(before);
    });

    it('refuses a response with a DOCTYPE (entity expansion): SSO_ASSERTION_INVALID', async () => {
      const email = `bomb-${randomBytes(3).toString('hex')}@${domain}`;
      const before = await rows(email);
      const request = await start(email);
      const lol = '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>';
      const xml = idp
        .responseXml(request, spEntityId, { email })
        .replace('<saml:Issuer>', '<saml:Issuer>&b;');
      const acs = await postAcs({
        SAMLResponse: Buffer.from(`${lol}${xml}`).toString('base64'),
        RelayState: request.relayState!,
      });
      expect(landed(acs).get('error')).to.equal('SSO_ASSERTION_INVALID');
      expect(await rows(email)).to.deep.equal({ ...before, users: 0 });
    });

    it('passes on an error status of the IdP: SSO_IDP_ERROR', async () => {
      const email = `denied-${randomBytes(3).toString('hex')}@${domain}`;
      const before = await rows(email);
      const request = await start(email);
      const acs = await answer(request, {
        status: { code: 'urn:oasis:names:tc:SAML:2.0:status:Requester', message: 'User not assigned' },
      });
      const params = landed(acs);
      expect(params.get('error')).to.equal('SSO_IDP_ERROR');
      expect(params.get('error_description')).to.include('User not assigned');
      expect(await rows(email)).to.deep.equal({ ...before, users: 0 });
    });

    it('refuses an unknown RelayState with a page: SSO_STATE_INVALID (400)', async () => {
      const email = `unknown-${randomBytes(3).toString('hex')}@${domain}`;
      const request = await start(email);
      const acs = await postAcs({
        SAMLResponse: idp.response(request, spEntityId, { email }),
        RelayState: 'nope',
      });
      expect(acs.status).to.equal(400);
      expect(acs.body).to.include('SSO_STATE_INVALID');
      expect((await rows(email)).users).to.equal(0);
    });

    it('shows a refused assertion on a page (401) when the sign-in has no return_to', async () => {
      const email = `nopage-${randomBytes(3).toString('hex')}@${domain}`;
      const request = await start(email, { returnTo: null });
      const acs = await answer(request, { email, sign: 'none' });
      expect(acs.status).to.equal(401);
      expect(acs.body).to.include('SSO_ASSERTION_INVALID');
      expect((await rows(email)).users).to.equal(0);
    });

    it('refuses an email outside the organization’s verified domains: SSO_DOMAIN_NOT_ALLOWED', async () => {
      const local = `cut-${randomBytes(3).toString('hex')}`;
      const request = await start(`${local}@${domain}`);
      // Signed for `<local>@<domain>.evil.test`; a comment after `<domain>` must not cut it short.
      const email = `${local}@${domain}.evil.test`;
      const acs = await answer(request, { email, wrap: 'comment-in-name-id' });
      expect(landed(acs).get('error')).to.equal('SSO_DOMAIN_NOT_ALLOWED');
      expect((await rows(`${local}@${domain}`)).users).to.equal(0);
      expect((await rows(email)).users).to.equal(0);
    });
  });
});
