// Test tier: server
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { Organization } from '../../../server/access/organization.entity.js';
import { Event } from '../../../server/events/event.entity.js';
import { decryptSecret } from '../../../server/lib/crypto.js';
import type { PlanId } from '../../../server/lib/plans.js';
import { createOrg, createUser } from '../../support/factories.js';
import { startDnsServer, type TestDnsServer } from '../../support/dns-server.js';
import { http } from '../../support/http.js';
import { IDP_CERT } from '../../support/idp-certificate.js';
import { startTestServer, type TestServer } from '../../support/server.js';

/**
 * The organization's single sign-on connection over HTTP (docs/sso.md): Enterprise only, owner writes and admin
 * reads, OIDC checked by discovery and SAML by its metadata, the client secret write-only and encrypted at rest,
 * domains verified by a TXT record of the test's own DNS server, audited, with `organization.updated`.
 */

const PUBLIC_BASE_URL = 'https://api.sso.example.test';

const IDP_CERT_BODY = IDP_CERT.replace(/-----[A-Z ]+-----|\s/g, '');
const FINGERPRINT = new X509Certificate(IDP_CERT).fingerprint256;

function idpMetadata(entityId: string, ssoUrl: string): string {
  return `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${entityId}">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${IDP_CERT_BODY}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${ssoUrl}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;
}

/**
 * An OpenID provider's discovery documents on loopback: `<base><prefix>/.well-known/openid-configuration` answers
 * the metadata of the issuer `<base><prefix>`, except under `/missing`, which answers 404.
 */
async function startDiscovery(): Promise<{ base: string; close(): Promise<void> }> {
  let base = '';
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', base).pathname;
    const suffix = '/.well-known/openid-configuration';
    if (!path.endsWith(suffix) || path.startsWith('/missing')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}');
      return;
    }
    const issuer = `${base}${path.slice(0, -suffix.length)}`;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        issuer,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        code_challenge_methods_supported: ['S256'],
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const uniqueDomain = (label: string) => `${label}-${randomBytes(4).toString('hex')}.example`;

describe('SSO connections: PUT, GET, DELETE /v1/organization/sso and domain verification', function () {
  this.timeout(120_000);
  let s: TestServer;
  let dns: TestDnsServer;
  let idp: Awaited<ReturnType<typeof startDiscovery>>;

  before(async () => {
    dns = await startDnsServer();
    idp = await startDiscovery();
    s = await startTestServer({ env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL } });
  });

  after(async () => {
    await s?.close();
    await dns?.close();
    await idp?.close();
  });

  const call = (method: string, path: string, token: string, body?: unknown) =>
    http(s.baseUrl, method, `/v1${path}`, { token, ...(body === undefined ? {} : { body }) });
  const put = (token: string, body: unknown) => call('PUT', '/organization/sso', token, body);
  const get = (token: string) => call('GET', '/organization/sso', token);
  const del = (token: string) => call('DELETE', '/organization/sso', token);
  const verify = (token: string, domain: string) =>
    call('POST', `/organization/sso/domains/${domain}/verify`, token);
  const publish = (domain: string, ...values: string[]) => dns.txt.set(`_cloud-platform.${domain}`, values);

  const oidc = (extra: Record<string, unknown> = {}) => ({
    protocol: 'oidc',
    issuer: `${idp.base}/realms/acme`,
    client_id: 'cloud-platform',
    client_secret: 'the-client-secret-Zq81',
    ...extra,
  });
  const enterprise = () => createOrg(s.deps, { plan: 'enterprise' });

  /** The stored connection row, as it is in the table. */
  const storedRow = async (organizationId: string) => {
    const rows = await s.deps.db.orm.em
      .fork()
      .execute<{ client_secret: string | null; protocol: string }[]>(
        'select client_secret, protocol from sso_connections where organization_id = ?',
        [organizationId],
      );
    return rows[0];
  };
  const events = (organizationId: string) =>
    s.deps.db.orm.em
      .fork()
      .find(Event, { organizationId, type: 'organization.updated' }, { orderBy: { seq: 'asc' } });
  const auditEntries = (organizationId: string) =>
    s.deps.db.orm.em
      .fork()
      .execute<{ action: string; actor_id: string; status: number }[]>(
        `select action, actor_id, status from audit_logs where organization_id = ? and action like 'sso.%' order by created_at, id`,
        [organizationId],
      );

  describe('the plan', () => {
    for (const plan of ['starter', 'pro'] as PlanId[]) {
      it(`answers 402 PLAN_LIMIT_EXCEEDED on every path on ${plan}, and stores nothing`, async () => {
        const owner = await createOrg(s.deps, { plan });
        const answers = [
          await get(owner.token),
          await put(owner.token, oidc({ domains: [uniqueDomain('plan')] })),
          await del(owner.token),
          await verify(owner.token, 'example.com'),
        ];
        for (const res of answers) {
          expect(res.status, res.text).to.equal(402);
          expect(res.body.error.code).to.equal('PLAN_LIMIT_EXCEEDED');
          expect(res.body.error.details).to.deep.equal([{ resource: 'sso', limit: 0, current: 0 }]);
          expect(res.body.error.message).to.include('Enterprise');
        }
        expect(await storedRow(owner.organizationId)).to.equal(undefined);
        expect(await events(owner.organizationId)).to.have.length(0);
      });
    }

    it('takes effect with the plan: an organization moved to Enterprise configures SSO', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      expect((await put(owner.token, oidc())).status).to.equal(402);
      await s.deps.db.orm.em
        .fork()
        .nativeUpdate(Organization, { id: owner.organizationId }, { plan: 'enterprise' });
      const res = await put(owner.token, oidc());
      expect(res.status, res.text).to.equal(200);
    });
  });

  describe('roles', () => {
    it('lets admins read, refuses members, and keeps writes to the owner', async () => {
      const owner = await enterprise();
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
      const domain = uniqueDomain('roles');

      // No connection yet: 404 for those who may read.
      const none = await get(admin.token);
      expect(none.status, none.text).to.equal(404);
      expect(none.body.error.code).to.equal('NOT_FOUND');

      expect((await put(owner.token, oidc({ domains: [domain] }))).status).to.equal(200);
      const read = await get(admin.token);
      expect(read.status, read.text).to.equal(200);
      expect(read.body.sso.client_id).to.equal('cloud-platform');

      for (const res of [
        await get(member.token),
        await put(member.token, oidc()),
        await del(member.token),
        await verify(member.token, domain),
        await put(admin.token, oidc({ client_id: 'changed-by-admin' })),
        await del(admin.token),
        await verify(admin.token, domain),
      ]) {
        expect(res.status, res.text).to.equal(403);
        expect(res.body.error.code).to.equal('FORBIDDEN');
      }
      const after = await get(owner.token);
      expect(after.body.sso.client_id).to.equal('cloud-platform');
      expect(after.body.sso.domains.map((d: { domain: string }) => d.domain)).to.deep.equal([domain]);
    });
  });

  describe('OpenID Connect', () => {
    it('creates the connection after discovery; GET shows it with the SP values and never the secret', async () => {
      const owner = await enterprise();
      const res = await put(owner.token, oidc());
      expect(res.status, res.text).to.equal(200);
      const sso = res.body.sso;
      const sp = `${PUBLIC_BASE_URL}/v1/auth/sso/saml/metadata/${owner.organizationId}`;
      expect(sso).to.deep.equal({
        protocol: 'oidc',
        issuer: `${idp.base}/realms/acme`,
        client_id: 'cloud-platform',
        idp_entity_id: null,
        idp_sso_url: null,
        idp_certificate_fingerprint: null,
        domains: [],
        default_role: 'member',
        enforced: false,
        redirect_uri: `${PUBLIC_BASE_URL}/v1/auth/sso/oidc/callback`,
        acs_url: `${PUBLIC_BASE_URL}/v1/auth/sso/saml/acs`,
        entity_id: sp,
        metadata_url: sp,
        created_at: sso.created_at,
        updated_at: sso.updated_at,
      });
      expect(res.text).to.not.include('the-client-secret-Zq81');

      const read = await get(owner.token);
      expect(read.status).to.equal(200);
      expect(read.body).to.deep.equal(res.body);
      expect(read.text).to.not.include('the-client-secret-Zq81');
    });

    it('stores the client secret encrypted, and keeps it when a later PUT leaves it out', async () => {
      const owner = await enterprise();
      expect((await put(owner.token, oidc())).status).to.equal(200);
      const first = await storedRow(owner.organizationId);
      expect(first!.client_secret).to.be.a('string');
      expect(first!.client_secret).to.not.include('the-client-secret-Zq81');
      expect(decryptSecret(s.deps.keys.secrets, first!.client_secret!)).to.equal('the-client-secret-Zq81');

      const { client_secret: _omitted, ...withoutSecret } = oidc({
        client_id: 'renamed-client',
        default_role: 'admin',
        enforced: true,
      });
      const again = await put(owner.token, withoutSecret);
      expect(again.status, again.text).to.equal(200);
      expect(again.body.sso).to.include({
        client_id: 'renamed-client',
        default_role: 'admin',
        enforced: true,
      });
      const kept = await storedRow(owner.organizationId);
      expect(decryptSecret(s.deps.keys.secrets, kept!.client_secret!)).to.equal('the-client-secret-Zq81');

      // Fields left out keep their values.
      const third = await put(owner.token, oidc({ client_secret: 'a-new-secret' }));
      expect(third.body.sso).to.include({
        client_id: 'cloud-platform',
        default_role: 'admin',
        enforced: true,
      });
      const rotated = await storedRow(owner.organizationId);
      expect(decryptSecret(s.deps.keys.secrets, rotated!.client_secret!)).to.equal('a-new-secret');
    });

    it('refuses an issuer without a discovery document, and a first connection without a secret (400, nothing stored)', async () => {
      const owner = await enterprise();
      const unreachable = await put(owner.token, oidc({ issuer: `${idp.base}/missing` }));
      expect(unreachable.status, unreachable.text).to.equal(400);
      expect(unreachable.body.error.code).to.equal('VALIDATION_ERROR');
      expect(unreachable.body.error.details[0].path).to.equal('issuer');

      const { client_secret: _omitted, ...withoutSecret } = oidc();
      const noSecret = await put(owner.token, withoutSecret);
      expect(noSecret.status, noSecret.text).to.equal(400);
      expect(noSecret.body.error.details).to.deep.equal([
        {
          path: 'client_secret',
          message: 'Required when the connection is created or changes protocol to `oidc`',
        },
      ]);
      expect((await get(owner.token)).status).to.equal(404);
      expect(await storedRow(owner.organizationId)).to.equal(undefined);
      expect(await events(owner.organizationId)).to.have.length(0);
    });
    it('applies two first PUTs at once one after the other: one connection, no error', async () => {
      const owner = await enterprise();
      const domain = uniqueDomain('race');
      const [one, two] = await Promise.all([
        put(owner.token, oidc({ client_id: 'first', domains: [domain] })),
        put(owner.token, oidc({ client_id: 'second', domains: [domain] })),
      ]);
      expect([one.status, two.status], `${one.text} ${two.text}`).to.deep.equal([200, 200]);
      const read = await get(owner.token);
      expect(read.body.sso.client_id).to.be.oneOf(['first', 'second']);
      expect(read.body.sso.domains).to.have.length(1);
      const [row] = await s.deps.db.orm.em
        .fork()
        .execute<{ n: number }[]>(
          'select count(*)::int as n from sso_connections where organization_id = ?',
          [owner.organizationId],
        );
      expect(Number(row?.n)).to.equal(1);
    });
  });

  describe('SAML', () => {
    it('reads the IdP from metadata_xml, or takes its three fields; the secret of an OIDC connection goes', async () => {
      const owner = await enterprise();
      expect((await put(owner.token, oidc())).status).to.equal(200);

      const res = await put(owner.token, {
        protocol: 'saml',
        metadata_xml: idpMetadata('https://idp.example.test/saml', 'https://idp.example.test/sso'),
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.sso).to.include({
        protocol: 'saml',
        issuer: null,
        client_id: null,
        idp_entity_id: 'https://idp.example.test/saml',
        idp_sso_url: 'https://idp.example.test/sso',
        idp_certificate_fingerprint: FINGERPRINT,
        acs_url: `${PUBLIC_BASE_URL}/v1/auth/sso/saml/acs`,
        entity_id: `${PUBLIC_BASE_URL}/v1/auth/sso/saml/metadata/${owner.organizationId}`,
      });
      expect((await storedRow(owner.organizationId))!.client_secret).to.equal(null);
      expect((await get(owner.token)).body).to.deep.equal(res.body);

      const fields = await put(owner.token, {
        protocol: 'saml',
        idp_entity_id: 'urn:idp:other',
        idp_sso_url: 'https://other-idp.example.test/sso',
        idp_certificate: IDP_CERT,
      });
      expect(fields.status, fields.text).to.equal(200);
      expect(fields.body.sso).to.include({
        idp_entity_id: 'urn:idp:other',
        idp_sso_url: 'https://other-idp.example.test/sso',
        idp_certificate_fingerprint: FINGERPRINT,
      });

      // Back to OIDC: a secret is needed again.
      const { client_secret: _omitted, ...withoutSecret } = oidc();
      const back = await put(owner.token, withoutSecret);
      expect(back.status, back.text).to.equal(400);
      expect(back.body.error.details[0].path).to.equal('client_secret');
    });
  });

  describe('validation', () => {
    it('answers 400 in the envelope, naming each field, and stores nothing', async () => {
      const owner = await enterprise();
      const cases: [unknown, string][] = [
        [{ ...oidc(), metadata_xml: '<x/>' }, 'metadata_xml'],
        [{ protocol: 'oidc', client_id: 'x', client_secret: 'y' }, 'issuer'],
        [{ protocol: 'saml' }, 'idp_entity_id'],
        [{ protocol: 'saml', client_secret: 'x', metadata_xml: '<x/>' }, 'client_secret'],
        [
          {
            protocol: 'saml',
            metadata_xml: idpMetadata('urn:a', 'https://a.example/sso'),
            idp_entity_id: 'urn:b',
          },
          'idp_entity_id',
        ],
        [{ protocol: 'saml', metadata_xml: '<not-metadata/>' }, 'metadata_xml'],
        [
          {
            protocol: 'saml',
            idp_entity_id: 'urn:a',
            idp_sso_url: 'https://a.example/sso',
            idp_certificate: 'nope',
          },
          'idp_certificate',
        ],
        [
          {
            protocol: 'saml',
            idp_entity_id: 'urn:a',
            idp_sso_url: 'ftp://a.example/sso',
            idp_certificate: IDP_CERT,
          },
          'idp_sso_url',
        ],
        [oidc({ default_role: 'owner' }), 'default_role'],
        [oidc({ domains: ['Example.COM'] }), 'domains.0'],
        [oidc({ domains: ['localhost'] }), 'domains.0'],
        [oidc({ domains: ['10.0.0.1'] }), 'domains.0'],
        [oidc({ domains: ['a.example', 'a.example'] }), 'domains.1'],
        [oidc({ enforced: 'yes' }), 'enforced'],
        [oidc({ secret_sauce: true }), ''],
        [{ protocol: 'ldap' }, 'protocol'],
      ];
      for (const [body, path] of cases) {
        const res = await put(owner.token, body);
        expect(res.status, `${JSON.stringify(body)}: ${res.text}`).to.equal(400);
        expect(res.body.success).to.equal(false);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
        expect(res.body.error.request_id).to.be.a('string');
        const paths = (res.body.error.details as { path: string }[]).map((d) => d.path);
        if (path) expect(paths, JSON.stringify(body)).to.include(path);
      }
      expect((await get(owner.token)).status).to.equal(404);
      expect(await storedRow(owner.organizationId)).to.equal(undefined);
    });
  });

  describe('domains', () => {
    it('starts pending, is verified by its TXT record, and a domain verified by one organization is refused to another', async () => {
      const a = await enterprise();
      const b = await enterprise();
      const domain = uniqueDomain('corp');
      const other = uniqueDomain('other');

      const res = await put(a.token, oidc({ domains: [domain, other] }));
      expect(res.status, res.text).to.equal(200);
      const [first, second] = res.body.sso.domains;
      expect([first.domain, second.domain]).to.deep.equal([domain, other].sort());
      const mine = [first, second].find((d: { domain: string }) => d.domain === domain);
      expect(mine.verification.status).to.equal('pending');
      expect(mine.verification.record).to.deep.equal({
        type: 'TXT',
        name: `_cloud-platform.${domain}`,
        value: mine.verification.record.value,
      });
      expect(mine.verification.record.value).to.match(/^[0-9a-f]{32}$/);

      // B's pending claim of the same domain does not block A, and has its own value.
      const claim = await put(b.token, oidc({ domains: [domain] }));
      expect(claim.status, claim.text).to.equal(200);
      const bValue = claim.body.sso.domains[0].verification.record.value;
      expect(bValue).to.not.equal(mine.verification.record.value);

      // Nothing published: 409 DOMAIN_NOT_VERIFIED naming the record, and nothing changes.
      const early = await verify(a.token, domain);
      expect(early.status, early.text).to.equal(409);
      expect(early.body.error.code).to.equal('DOMAIN_NOT_VERIFIED');
      expect(early.body.error.message).to.include(`_cloud-platform.${domain}`);
      expect(early.body.error.details).to.deep.equal([{ record: mine.verification.record, found: [] }]);
      const wrong = (publish(domain, 'v=spf1 -all'), await verify(a.token, domain));
      expect(wrong.status).to.equal(409);
      expect(wrong.body.error.details[0].found).to.deep.equal(['v=spf1 -all']);
      expect((await get(a.token)).body.sso.domains.map((d: any) => d.verification.status)).to.deep.equal([
        'pending',
        'pending',
      ]);

      publish(domain, mine.verification.record.value, bValue);
      const ok = await verify(a.token, domain);
      expect(ok.status, ok.text).to.equal(200);
      const verified = ok.body.sso.domains.find((d: { domain: string }) => d.domain === domain);
      expect(verified.verification).to.deep.equal({ status: 'verified', record: mine.verification.record });
      // Again: the same answer, unchanged.
      const again = await verify(a.token, domain);
      expect(again.status).to.equal(200);
      expect(again.body).to.deep.equal(ok.body);

      // B cannot verify it now, even with its value published; nor claim it anew.
      const late = await verify(b.token, domain);
      expect(late.status, late.text).to.equal(409);
      expect(late.body.error.code).to.equal('CONFLICT');
      expect((await get(b.token)).body.sso.domains[0].verification.status).to.equal('pending');
      const c = await enterprise();
      const taken = await put(c.token, oidc({ domains: [domain] }));
      expect(taken.status, taken.text).to.equal(409);
      expect(taken.body.error.code).to.equal('CONFLICT');
      expect(taken.body.error.details).to.deep.equal([
        { path: 'domains.0', message: 'Already verified by another organization' },
      ]);
      expect((await get(c.token)).status).to.equal(404);

      // A domain not of the connection: 404.
      const unknown = await verify(a.token, uniqueDomain('unknown'));
      expect(unknown.status, unknown.text).to.equal(404);
      // Like a path id: what is not a domain of the connection is not found; the case does not matter.
      const malformed = await verify(a.token, 'not_a_domain');
      expect(malformed.status, malformed.text).to.equal(404);
      expect((await verify(a.token, domain.toUpperCase())).status).to.equal(200);

      // A PUT that keeps the domain keeps its verification; one that drops it frees it for B.
      const kept = await put(a.token, {
        protocol: 'oidc',
        issuer: `${idp.base}/realms/acme`,
        client_id: 'x',
        domains: [domain],
      });
      expect(kept.status, kept.text).to.equal(200);
      expect(kept.body.sso.domains).to.deep.equal([verified]);
      expect(
        (
          await put(a.token, {
            protocol: 'oidc',
            issuer: `${idp.base}/realms/acme`,
            client_id: 'x',
            domains: [],
          })
        ).body.sso.domains,
      ).to.deep.equal([]);
      const freed = await verify(b.token, domain);
      expect(freed.status, freed.text).to.equal(200);
      expect(freed.body.sso.domains[0].verification.status).to.equal('verified');
    });
  });

  describe('isolation', () => {
    it("never shows or changes another organization's connection", async () => {
      const a = await enterprise();
      const b = await enterprise();
      const domain = uniqueDomain('iso');
      expect((await put(a.token, oidc({ domains: [domain] }))).status).to.equal(200);
      const before = (await get(a.token)).body;

      expect((await get(b.token)).status).to.equal(404);
      expect((await del(b.token)).status).to.equal(404);
      const cross = await verify(b.token, domain);
      expect(cross.status, cross.text).to.equal(404);
      expect((await put(b.token, oidc({ client_id: 'b-client' }))).status).to.equal(200);
      expect((await del(b.token)).status).to.equal(200);

      expect((await get(a.token)).body).to.deep.equal(before);
      expect(before.sso.entity_id).to.include(a.organizationId);
    });
  });

  describe('audit and events', () => {
    it('audits each change and emits organization.updated with the organization; DELETE removes it', async () => {
      const owner = await enterprise();
      const domain = uniqueDomain('audit');
      const set = await put(owner.token, oidc({ domains: [domain] }));
      expect(set.status).to.equal(200);
      publish(domain, set.body.sso.domains[0].verification.record.value);
      expect((await verify(owner.token, domain)).status).to.equal(200);
      // Verifying a verified domain changes nothing, and emits nothing.
      expect((await verify(owner.token, domain)).status).to.equal(200);

      const removed = await del(owner.token);
      expect(removed.status, removed.text).to.equal(200);
      expect(removed.body).to.deep.equal({ success: true, message: 'SSO connection deleted' });
      expect((await get(owner.token)).status).to.equal(404);
      const second = await del(owner.token);
      expect(second.status).to.equal(404);
      expect(await storedRow(owner.organizationId)).to.equal(undefined);

      const emitted = await events(owner.organizationId);
      expect(emitted).to.have.length(3);
      for (const e of emitted) {
        expect(e.data).to.deep.equal({
          object: {
            id: owner.organizationId,
            name: 'Test Org',
            plan: 'enterprise',
            owner_id: owner.id,
            users_count: 1,
            created_at: (e.data as any).object.created_at,
          },
        });
      }
      const entries = await auditEntries(owner.organizationId);
      // The refused second DELETE (404) is not an entry (docs/audit-log.md).
      expect(entries.map((e) => [e.action, e.actor_id, e.status])).to.deep.equal([
        ['sso.set', owner.id, 200],
        ['sso.verifyDomain', owner.id, 200],
        ['sso.verifyDomain', owner.id, 200],
        ['sso.delete', owner.id, 200],
      ]);
    });

    it('a domain freed by DELETE can be verified by another organization', async () => {
      const a = await enterprise();
      const b = await enterprise();
      const domain = uniqueDomain('freed');
      const set = await put(a.token, oidc({ domains: [domain] }));
      publish(domain, set.body.sso.domains[0].verification.record.value);
      expect((await verify(a.token, domain)).status).to.equal(200);
      const claim = await put(b.token, oidc({ domains: [domain] }));
      expect(claim.status).to.equal(409);
      expect((await del(a.token)).status).to.equal(200);
      const now = await put(b.token, oidc({ domains: [domain] }));
      expect(now.status, now.text).to.equal(200);
      publish(domain, now.body.sso.domains[0].verification.record.value);
      expect((await verify(b.token, domain)).status).to.equal(200);
    });
  });
});
