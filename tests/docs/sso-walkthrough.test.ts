// Test tier: server
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createOrg, type TestUser } from '../support/factories.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { http } from '../support/http.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';
import { parseRedirectRequest, SamlTestIdp } from '../support/saml-idp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { curlCommands, curlRequest, section, type CurlText } from './curl.js';
import { fencedBlocks, read } from './markdown.js';

/**
 * docs/sso.md, followed as written against a real OpenID Connect provider (tests/support/oidc-provider.ts), a SAML
 * IdP that signs its responses (tests/support/saml-idp.ts) and a DNS server of the test's own: the curl commands of
 * "Set up, step by step", "Google Workspace" and "Signing in" are read from the guide and sent as they are, with only
 * the guide's example values replaced by the test's (the Keycloak issuer, the client id and secret, the IdP metadata,
 * the domain `example.com`, the code). A guide whose commands, paths or bodies drift from what the API does fails
 * here.
 */

type Json = Record<string, unknown>;

const GUIDE = 'docs/sso.md';
const PUBLIC_BASE_URL = 'https://api.example.com';
/** The guide's examples: its Keycloak realm, client, secret, domain and code. */
const EXAMPLE = {
  issuer: 'https://keycloak.example.com/realms/example',
  clientId: '"cloud-platform"',
  clientSecret: '<the client secret>',
  domain: 'example.com',
  code: '<the code>',
};

async function send(
  command: CurlText,
  vars: Record<string, string>,
): Promise<{ status: number; body: Json; method: string; url: string }> {
  const req = curlRequest(command, vars);
  const res = await fetch(req.url, { method: req.method, headers: req.headers, body: req.body });
  const text = await res.text();
  return {
    status: res.status,
    body: (text ? JSON.parse(text) : {}) as Json,
    method: req.method,
    url: req.url,
  };
}

/** Every key path of a JSON value (`sso.domains.0.verification.record.name`), arrays by their first item. */
function keyPaths(value: unknown, prefix = ''): string[] {
  if (Array.isArray(value)) return value.length ? keyPaths(value[0], `${prefix}0.`) : [];
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value as Json).flatMap(([k, v]) => [
    `${prefix}${k}`,
    ...keyPaths(v, `${prefix}${k}.`),
  ]);
}

describe('docs/sso.md, step by step against a real OpenID Connect provider and a SAML IdP', function () {
  this.timeout(60_000);
  const guide = read(GUIDE);
  let dns: TestDnsServer;
  let provider: TestOidcProvider;
  let s: TestServer;
  let owner: TestUser;
  const domain = `sso-${randomBytes(5).toString('hex')}.example.test`;

  /** The guide's example values swapped for this test's, in a command's text. */
  const ours = (command: CurlText, code = '', ourDomain = domain): CurlText => ({
    line: command.line,
    text: command.text
      .replaceAll(EXAMPLE.issuer, provider.issuer)
      .replaceAll(EXAMPLE.clientId, JSON.stringify(provider.client.clientId))
      .replaceAll(EXAMPLE.clientSecret, provider.client.clientSecret)
      .replaceAll(EXAMPLE.domain, ourDomain)
      .replaceAll(EXAMPLE.code, code),
  });

  before(async () => {
    dns = await startDnsServer();
    s = await startTestServer({ env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL } });
    // Step 2: the IdP knows the redirect URI before the connection exists, from the guide's table.
    const row = /\| `redirect_uri` +\| `<PUBLIC_BASE_URL>(\/v1\/[^`]+)`/.exec(guide);
    expect(row, 'the redirect_uri row of "The values the IdP needs"').to.not.equal(null);
    provider = await startOidcProvider({ redirectUris: [`${PUBLIC_BASE_URL}${row![1]}`] });
  });

  after(async () => {
    await s?.close();
    await provider?.close();
    await dns?.close();
  });

  it('sets up the connection, verifies the domain and signs a new user in, as the guide says', async () => {
    owner = await createOrg(s.deps);
    const base = `${s.baseUrl}/v1`;
    const asOwner = { BASE: base, TOKEN: owner.token };

    // Step 1: the organization moves to enterprise (a card on file first). Below it, the connection is 402.
    const setUp = curlCommands(section(guide, 'Set up, step by step'));
    expect(
      setUp.map((c) => curlRequest(c, asOwner)).map((r) => `${r.method} ${r.url.slice(base.length)}`),
    ).to.deep.equal([
      'PUT /organization/sso',
      'GET /organization/sso',
      `POST /organization/sso/domains/${EXAMPLE.domain}/verify`,
    ]);
    const [put, get, verify] = setUp.map((c) => ours(c)) as [CurlText, CurlText, CurlText];
    const refused = await send(put, asOwner);
    expect(refused.status, JSON.stringify(refused.body)).to.equal(402);
    expect(refused.body.error).to.deep.include({ code: 'PLAN_LIMIT_EXCEEDED' });
    const card = await http(s.baseUrl, 'POST', '/v1/billing/payment-methods', {
      token: owner.token,
      body: { payment_method: 'pm_card_visa' },
    });
    expect(card.status).to.equal(201);
    const plan = await http(s.baseUrl, 'PUT', '/v1/billing/subscription', {
      token: owner.token,
      body: { plan: 'enterprise' },
    });
    expect(plan.status, plan.text).to.equal(200);

    // Step 3: the connection, with the IdP's values.
    const created = await send(put, asOwner);
    expect(created.status, JSON.stringify(created.body)).to.equal(200);

    // Step 4: the SP values and the record, in the shape the guide shows.
    const read_ = await send(get, asOwner);
    expect(read_.status).to.equal(200);
    const sso = read_.body.sso as Json & { domains: { verification: { status: string; record: Json } }[] };
    const example = fencedBlocks(section(guide, 'Set up, step by step'), 'json')[0];
    expect(example, 'the JSON answer of GET /organization/sso in the guide').to.not.equal(undefined);
    const shown = JSON.parse(example!.body) as Json;
    expect(keyPaths(read_.body).sort()).to.deep.equal(keyPaths(shown).sort());
    const shownSso = shown.sso as Json;
    for (const field of ['protocol', 'client_id', 'default_role', 'enforced', 'redirect_uri', 'acs_url']) {
      const want = field === 'client_id' ? provider.client.clientId : shownSso[field];
      expect(sso[field], field).to.equal(want);
    }
    const organization = `${PUBLIC_BASE_URL}/v1/auth/sso/saml/metadata/${owner.organizationId}`;
    expect(sso.entity_id).to.equal(organization);
    expect(sso.metadata_url).to.equal(organization);
    expect(sso.issuer).to.equal(provider.issuer);
    expect(sso).to.not.have.property('client_secret');
    // "Check that the IdP has redirect_uri exactly as shown."
    const registered = /\| `redirect_uri` +\| `<PUBLIC_BASE_URL>(\/v1\/[^`]+)`/.exec(guide)![1];
    expect(sso.redirect_uri).to.equal(`${PUBLIC_BASE_URL}${registered}`);
    const { verification } = sso.domains[0]!;
    expect(verification.status).to.equal('pending');
    expect(verification.record).to.deep.include({ type: 'TXT', name: `_cloud-platform.${domain}` });

    // "Signing in", step 1, before the domain is verified: 404, as for any unknown domain.
    const signIn = curlCommands(section(guide, 'Signing in'));
    expect(
      signIn.map((c) => curlRequest(c, asOwner)).map((r) => `${r.method} ${r.url.slice(base.length)}`),
    ).to.deep.equal(['POST /auth/sso/start', 'POST /auth/sso/token', 'GET /auth/me']);
    const [start, token, me] = signIn as [CurlText, CurlText, CurlText];
    const early = await send(ours(start), { BASE: base });
    expect(early.status).to.equal(404);

    // Step 5: the record published, the domain verified. Before, 409 DOMAIN_NOT_VERIFIED.
    const unpublished = await send(verify, asOwner);
    expect(unpublished.status).to.equal(409);
    expect(unpublished.body.error).to.deep.include({ code: 'DOMAIN_NOT_VERIFIED' });
    dns.txt.set(String(verification.record.name), [String(verification.record.value)]);
    const verified = await send(verify, asOwner);
    expect(verified.status, JSON.stringify(verified.body)).to.equal(200);
    const after = await send(get, asOwner);
    expect((after.body.sso as typeof sso).domains[0]!.verification.status).to.equal('verified');

    // "Signing in": start, the browser at the IdP and back, the code exchanged, /auth/me.
    const email = `grace@${domain}`;
    const account = provider.addAccount({ email, email_verified: true, name: 'Grace Hopper' });
    const started = await send(ours(start), { BASE: base });
    expect(started.status, JSON.stringify(started.body)).to.equal(200);
    const authorizationUrl = String(started.body.authorization_url);
    expect(authorizationUrl.startsWith(`${provider.issuer}/`)).to.equal(true);
    const returnTo = (JSON.parse(curlRequest(start, { BASE: base }).body!) as { return_to: string })
      .return_to;

    const back = await provider.signIn(authorizationUrl, account, { apiBaseUrl: s.baseUrl });
    expect(back.callbackUrl.href.startsWith(`${PUBLIC_BASE_URL}/v1/auth/sso/oidc/callback?`)).to.equal(true);
    expect(back.status, back.body).to.equal(302);
    const landed = new URL(back.location!);
    expect(`${landed.origin}${landed.pathname}`).to.equal(returnTo);
    const code = landed.searchParams.get('code');
    expect(code, back.location!).to.be.a('string').and.not.equal('');

    const exchanged = await send(ours(token, code!), { BASE: base });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(exchanged.body).to.include({ success: true, token_type: 'Bearer' });
    expect(exchanged.body.refresh_token).to.match(/^rt_/);
    expect(exchanged.body.user).to.deep.include({ email, role: 'member' });

    const who = await send(me, { BASE: base, TOKEN: String(exchanged.body.token) });
    expect(who.status).to.equal(200);
    expect(who.body.user).to.deep.include({ email, role: 'member', status: 'active' });

    // The code works once.
    const again = await send(ours(token, code!), { BASE: base });
    expect(again.status).to.equal(401);
    expect(again.body.error).to.deep.include({ code: 'INVALID_CREDENTIALS' });

    // Step 6: enforced. The domain's users are refused a password login, the owner's is audited (break-glass);
    // the client secret left out is kept.
    const enforce = await http(s.baseUrl, 'PUT', '/v1/organization/sso', {
      token: owner.token,
      body: {
        protocol: 'oidc',
        issuer: provider.issuer,
        client_id: provider.client.clientId,
        enforced: true,
      },
    });
    expect(enforce.status, enforce.text).to.equal(200);
    expect(enforce.body.sso).to.include({ enforced: true });
    const password = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email, password: 'correct-horse-battery' },
    });
    expect(password.status).to.equal(403);
    expect(password.body.error).to.deep.include({ code: 'SSO_REQUIRED' });
    expect(password.body.error.message).to.include('POST /v1/auth/sso/start');
    const breakGlass = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: owner.password },
    });
    expect(breakGlass.status, breakGlass.text).to.equal(200);

    // What the guide says the audit log holds (docs/audit-log.md).
    const audit = await http<{ audit_logs: { action: string; actor: { email: string }; status: number }[] }>(
      s.baseUrl,
      'GET',
      '/v1/audit-logs?limit=100',
      { token: owner.token },
    );
    const entries = audit.body.audit_logs.map((e) => `${e.action} ${e.actor.email} ${e.status}`);
    expect(entries).to.include.members([
      `sso.set ${owner.email} 402`,
      `sso.set ${owner.email} 200`,
      `sso.verifyDomain ${owner.email} 409`,
      `sso.verifyDomain ${owner.email} 200`,
      `auth.sso_user_created ${email} 200`,
      `sso.token ${email} 200`,
      `auth.sso_break_glass ${owner.email} 200`,
    ]);
  });
  it('connects a SAML IdP with its metadata as "Google Workspace" shows, and signs a user in through the ACS', async () => {
    const samlOwner = await createOrg(s.deps, { plan: 'enterprise' });
    const samlDomain = `saml-${randomBytes(5).toString('hex')}.example.test`;
    const base = `${s.baseUrl}/v1`;
    const idp = new SamlTestIdp();
    const vars = { BASE: base, TOKEN: samlOwner.token, METADATA: JSON.stringify(idp.metadataXml()) };
    const google = curlCommands(section(guide, 'Google Workspace')).map((c) => ours(c, '', samlDomain));
    expect(
      google.map((c) => curlRequest(c, vars)).map((r) => `${r.method} ${r.url.slice(base.length)}`),
    ).to.deep.equal(['PUT /organization/sso', 'GET /organization/sso']);
    const [put, get] = google as [CurlText, CurlText];
    const created = await send(put, vars);
    expect(created.status, JSON.stringify(created.body)).to.equal(200);
    expect(created.body.sso).to.deep.include({ protocol: 'saml', issuer: null, client_id: null });
    expect((created.body.sso as Json).idp_entity_id).to.equal(idp.entityId);
    expect((created.body.sso as Json).idp_sso_url).to.equal(idp.ssoUrl);

    // The values the SAML app takes: ACS URL and entity ID.
    const sso = (await send(get, vars)).body.sso as Json & {
      domains: { verification: { record: { name: string; value: string } } }[];
    };
    expect(sso.acs_url).to.equal(`${PUBLIC_BASE_URL}/v1/auth/sso/saml/acs`);
    expect(sso.entity_id).to.equal(
      `${PUBLIC_BASE_URL}/v1/auth/sso/saml/metadata/${samlOwner.organizationId}`,
    );
    const metadata = await fetch(`${s.baseUrl}/v1/auth/sso/saml/metadata/${samlOwner.organizationId}`);
    expect(metadata.status).to.equal(200);
    const spMetadata = await metadata.text();
    expect(spMetadata).to.include(String(sso.entity_id)).and.include(String(sso.acs_url));

    // The record and the verification of "Set up, step by step", then "Signing in".
    const { record } = sso.domains[0]!.verification;
    dns.txt.set(record.name, [record.value]);
    const verify = ours(curlCommands(section(guide, 'Set up, step by step'))[2]!, '', samlDomain);
    expect((await send(verify, vars)).status).to.equal(200);
    const [start, token] = curlCommands(section(guide, 'Signing in')) as [CurlText, CurlText];
    const email = `grace@${samlDomain}`;
    const started = await send(ours(start, '', samlDomain), { BASE: base });
    expect(started.status, JSON.stringify(started.body)).to.equal(200);
    const url = String(started.body.authorization_url);
    expect(url.startsWith(`${idp.ssoUrl}?`), url).to.equal(true);
    const request = parseRedirectRequest(url);
    expect(request.acsUrl).to.equal(sso.acs_url);
    expect(request.issuer).to.equal(sso.entity_id);

    // The IdP posts the signed Response to the ACS (HTTP-POST binding), with the RelayState.
    const acs = await fetch(`${s.baseUrl}/v1/auth/sso/saml/acs`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        SAMLResponse: idp.response(request, String(sso.entity_id), { email }),
        RelayState: request.relayState!,
      }).toString(),
      redirect: 'manual',
    });
    expect(acs.status, await acs.clone().text()).to.equal(302);
    const code = new URL(acs.headers.get('location')!).searchParams.get('code');
    expect(code).to.be.a('string').and.not.equal('');
    const exchanged = await send(ours(token, code!, samlDomain), { BASE: base });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(exchanged.body.user).to.deep.include({ email, role: 'member' });
  });
});
