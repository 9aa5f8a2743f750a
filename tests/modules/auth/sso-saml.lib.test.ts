// Test tier: unit
import { expect } from 'chai';
import { AppError } from '../../../server/lib/errors.js';
import { SsoFailure } from '../../../server/modules/auth/sso-errors.js';
import {
  MAX_METADATA_CHARS,
  parseIdpMetadata,
  samlAuthorizeUrl,
  samlValidate,
  spMetadataXml,
  type SamlConfig,
} from '../../../server/modules/auth/sso-saml.js';
import {
  EMAIL_FORMAT,
  SamlTestIdp,
  UNSPECIFIED_FORMAT,
  parseRedirectRequest,
  testKeyPair,
  type ResponseOptions,
  type Wrapping,
} from '../../support/saml-idp.js';
import { rejection } from '../../support/rejection.js';

/**
 * The SAML library of single sign-on (server/modules/auth/sso-saml.ts, docs/sso.md "SAML"): IdP metadata, the
 * AuthnRequest of the HTTP-Redirect binding and the validation of the posted Response, against the test IdP
 * (tests/support/saml-idp.ts), which signs with a key made for the run.
 */

const SP = 'https://api.example.test/v1/auth/sso/saml/metadata/org_1';
const ACS = 'https://api.example.test/v1/auth/sso/saml/acs';

describe('SSO SAML library', function () {
  this.timeout(20_000);
  const idp = new SamlTestIdp();
  const cfg: SamlConfig = {
    spEntityId: SP,
    acsUrl: ACS,
    idpEntityId: idp.entityId,
    idpSsoUrl: idp.ssoUrl,
    idpCertificate: idp.certificate,
  };

  async function signIn() {
    const { url, requestId } = await samlAuthorizeUrl(cfg, { relayState: 'relay-1' });
    return { url, requestId, request: parseRedirectRequest(url) };
  }
  async function validate(opts: ResponseOptions = {}, expectedRequestId?: string) {
    const { request, requestId } = await signIn();
    return samlValidate(
      cfg,
      { SAMLResponse: idp.response(request, SP, opts) },
      { requestId: expectedRequestId ?? requestId },
    );
  }
  async function refusal(opts: ResponseOptions, expectedRequestId?: string): Promise<SsoFailure> {
    const err = await rejection(validate(opts, expectedRequestId));
    expect(err).to.be.instanceOf(SsoFailure);
    return err as SsoFailure;
  }

  describe('parseIdpMetadata', () => {
    it('reads the entity id, the HTTP-Redirect sign-on URL and the signing certificates', () => {
      const other = testKeyPair('other');
      const md = parseIdpMetadata(idp.metadataXml([other.certificate]));
      expect(md.entityId).to.equal(idp.entityId);
      expect(md.ssoUrl).to.equal(idp.ssoUrl);
      expect(md.certificates).to.have.length(2);
      expect(md.certificates[0]).to.match(/^-----BEGIN CERTIFICATE-----\n/);
      expect(md.certificates[0]!.replace(/\s+/g, '')).to.equal(idp.certificate.replace(/\s+/g, ''));
    });

    const bad: [string, string | (() => string), RegExp][] = [
      ['a DOCTYPE with entities', `<!DOCTYPE x [<!ENTITY a "aaaa">]>${'x'}`, /DOCTYPE/],
      [
        'a billion-laughs document',
        () =>
          `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>` +
          idp
            .metadataXml()
            .replace(/^<\?xml[^>]*>/, '')
            .replace('entityID="', 'entityID="&lol2;'),
        /DOCTYPE/,
      ],
      [
        'an external entity',
        () =>
          `<!DOCTYPE md [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>` +
          idp
            .metadataXml()
            .replace(/^<\?xml[^>]*>/, '')
            .replace('entityID="', 'entityID="&xxe;'),
        /DOCTYPE/,
      ],
      ['a huge input', () => `<x>${' '.repeat(MAX_METADATA_CHARS)}</x>`, /at most/],
      ['not XML', 'hello', /EntityDescriptor|well-formed/],
      ['malformed XML', () => idp.metadataXml().slice(0, 200), /well-formed|EntityDescriptor/],
      ['another document', '<html xmlns="http://www.w3.org/1999/xhtml"/>', /EntityDescriptor/],
      [
        'no HTTP-Redirect binding',
        () => idp.metadataXml().replace(/<md:SingleSignOnService[^>]*HTTP-Redirect[^>]*>/, ''),
        /HTTP-Redirect/,
      ],
      [
        'no certificate',
        () => idp.metadataXml().replace(/<md:KeyDescriptor[\s\S]*?<\/md:KeyDescriptor>/, ''),
        /certificate/,
      ],
      [
        'a broken certificate',
        () => idp.metadataXml().replace(/<ds:X509Certificate>[^<]{20}/, '<ds:X509Certificate>'),
        /certificate/,
      ],
      [
        'an http:// sign-on URL',
        () => idp.metadataXml().replaceAll(idp.ssoUrl, 'http://idp.example.test/sso'),
        /https/,
      ],
      ['no entity id', () => idp.metadataXml().replace(/entityID="[^"]*"/, ''), /entityID/],
    ];
    for (const [what, input, message] of bad) {
      it(`refuses ${what} with a 400 on metadata_xml`, () => {
        const xml = typeof input === 'function' ? input() : input;
        let err: unknown;
        try {
          parseIdpMetadata(xml);
        } catch (e) {
          err = e;
        }
        expect(err).to.be.instanceOf(AppError);
        const e = err as AppError;
        expect(e.code).to.equal('VALIDATION_ERROR');
        expect(e.status).to.equal(400);
        expect(e.details?.[0]).to.include({ path: 'metadata_xml' });
        expect(e.message).to.match(message);
      });
    }

    it('accepts an http:// loopback sign-on URL only when insecure IdPs are allowed', () => {
      const local = new SamlTestIdp({ ssoUrl: 'http://127.0.0.1:4567/sso' });
      expect(() => parseIdpMetadata(local.metadataXml())).to.throw(AppError);
      expect(parseIdpMetadata(local.metadataXml(), { allowInsecure: true }).ssoUrl).to.equal(
        'http://127.0.0.1:4567/sso',
      );
    });
  });

  describe('samlAuthorizeUrl', () => {
    it('sends an AuthnRequest by the HTTP-Redirect binding with the RelayState, the ACS and the SP entity id', async () => {
      const { url, requestId, request } = await signIn();
      expect(url.startsWith(`${idp.ssoUrl}?`)).to.equal(true);
      expect(request.id).to.equal(requestId);
      expect(request.acsUrl).to.equal(ACS);
      expect(request.issuer).to.equal(SP);
      expect(request.destination).to.equal(idp.ssoUrl);
      expect(request.relayState).to.equal('relay-1');
      expect(request.xml).to.include(EMAIL_FORMAT);
      const again = await samlAuthorizeUrl(cfg, { relayState: 'relay-2' });
      expect(again.requestId).to.not.equal(requestId);
    });
  });

  it('keeps the query of an IdP sign-on URL that has one (Google Workspace: idpid)', async () => {
    const google = { ...cfg, idpSsoUrl: 'https://accounts.google.com/o/saml2/idp?idpid=C0abc123' };
    const { url, requestId } = await samlAuthorizeUrl(google, { relayState: 'relay-3' });
    const u = new URL(url);
    expect(`${u.origin}${u.pathname}`).to.equal('https://accounts.google.com/o/saml2/idp');
    expect(u.searchParams.get('idpid')).to.equal('C0abc123');
    expect(parseRedirectRequest(url)).to.include({ id: requestId, relayState: 'relay-3' });
  });

  describe('samlValidate', () => {
    it('accepts a signed assertion: email from the NameID, name from the attributes, ID and expiry', async () => {
      const until = new Date(Date.now() + 120_000);
      const identity = await validate({
        email: 'Ada@Acme.test',
        assertionId: '_assertion-1',
        notOnOrAfter: until,
        attributes: { firstName: 'Ada', lastName: 'Lovelace' },
      });
      expect(identity).to.deep.equal({
        email: 'ada@acme.test',
        name: 'Ada Lovelace',
        assertionId: '_assertion-1',
        notOnOrAfter: new Date(until.toISOString()),
      });
    });

    it('takes the email from an attribute when the NameID is not an email', async () => {
      const identity = await validate({
        email: 'opaque-subject-42',
        nameIdFormat: UNSPECIFIED_FORMAT,
        attributes: {
          'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress': 'grace@acme.test',
          'http://schemas.microsoft.com/identity/claims/displayname': 'Grace Hopper',
        },
      });
      expect(identity).to.include({ email: 'grace@acme.test', name: 'Grace Hopper' });
    });

    it('accepts a response signed as a whole around a signed assertion', async () => {
      expect((await validate({ sign: 'both', email: 'a@acme.test' })).email).to.equal('a@acme.test');
    });

    it('accepts the certificate among several (a key rollover)', async () => {
      const rolled = { ...cfg, idpCertificate: testKeyPair('other').certificate + idp.certificate };
      const { request, requestId } = await signIn();
      const identity = await samlValidate(
        rolled,
        { SAMLResponse: idp.response(request, SP, { email: 'b@acme.test' }) },
        { requestId },
      );
      expect(identity.email).to.equal('b@acme.test');
    });

    const refusals: [string, ResponseOptions, RegExp][] = [
      ['an unsigned response', { sign: 'none' }, /signature/i],
      ['a response signed only as a whole (the assertion unsigned)', { sign: 'response' }, /signature/i],
      ['an assertion signed by another key', { signingKey: testKeyPair('other') }, /signature/i],
      ['another audience', { audience: 'https://other.example.test/sp' }, /audience/i],
      ['another recipient', { recipient: 'https://evil.example.test/acs' }, /recipient/i],
      ['another destination', { destination: 'https://evil.example.test/acs' }, /addressed/i],
      [
        'an expired assertion',
        { notOnOrAfter: new Date(Date.now() - 10 * 60_000) },
        /expired|subject confirmation/i,
      ],
      ['an assertion not valid yet', { notBefore: new Date(Date.now() + 10 * 60_000) }, /not yet valid/i],
      ['another issuer', { issuer: 'https://evil.example.test/idp' }, /issued by/i],
      ['no InResponseTo (unsolicited)', { inResponseTo: null }, /InResponseTo/],
      [
        'a subject confirmation answering another request',
        { subjectInResponseTo: '_another' },
        /InResponseTo|another request/,
      ],
      ['no email', { email: 'opaque', nameIdFormat: UNSPECIFIED_FORMAT }, /email/],
    ];
    for (const [what, opts, message] of refusals) {
      it(`refuses ${what} (SSO_ASSERTION_INVALID)`, async () => {
        const err = await refusal({ email: 'ada@acme.test', ...opts });
        expect(err.code).to.equal('SSO_ASSERTION_INVALID');
        expect(err.message).to.match(message);
      });
    }

    it('refuses a response to another request of the same IdP', async () => {
      const other = await signIn();
      const mine = await signIn();
      const posted = idp.response(other.request, SP, { email: 'ada@acme.test' });
      const err = await rejection(samlValidate(cfg, { SAMLResponse: posted }, { requestId: mine.requestId }));
      expect(err).to.be.instanceOf(SsoFailure);
      expect((err as SsoFailure).code).to.equal('SSO_ASSERTION_INVALID');
      expect((err as SsoFailure).message).to.match(/InResponseTo/);
    });

    const wrappings: Wrapping[] = [
      'signed-inside-evil',
      'evil-sibling-before',
      'evil-sibling-after',
      'signed-in-extensions',
      'signed-in-signature-object',
      'evil-same-id',
      'response-in-extensions',
    ];
    for (const wrap of wrappings) {
      it(`refuses a wrapped assertion: ${wrap}`, async () => {
        const err = await refusal({
          email: 'ada@acme.test',
          evilEmail: 'attacker@acme.test',
          wrap,
          sign: wrap === 'response-in-extensions' ? 'both' : 'assertion',
        });
        expect(err.code).to.equal('SSO_ASSERTION_INVALID');
      });
    }

    it('reads the signed NameID whole when a comment splits it (the comment does not truncate it)', async () => {
      const identity = await validate({ email: 'ada@acme.test.evil.test', wrap: 'comment-in-name-id' });
      expect(identity.email).to.equal('ada@acme.test.evil.test');
    });

    it('refuses a response with a DOCTYPE, garbage or nothing', async () => {
      const { request, requestId } = await signIn();
      const xml = idp.responseXml(request, SP, { email: 'ada@acme.test' });
      const posted = [
        Buffer.from(`<!DOCTYPE r [<!ENTITY e "x">]>${xml}`).toString('base64'),
        'not base64 !',
        Buffer.from('<hello/>').toString('base64'),
        '',
        undefined,
      ];
      for (const SAMLResponse of posted) {
        const err = await rejection(samlValidate(cfg, { SAMLResponse }, { requestId }));
        expect(err, String(SAMLResponse)).to.be.instanceOf(SsoFailure);
        expect((err as SsoFailure).code).to.equal('SSO_ASSERTION_INVALID');
      }
    });

    it('reports an error status of the IdP as SSO_IDP_ERROR', async () => {
      const err = await refusal({
        status: { code: 'urn:oasis:names:tc:SAML:2.0:status:Requester', message: 'User is not assigned' },
      });
      expect(err.code).to.equal('SSO_IDP_ERROR');
      expect(err.message).to.include('User is not assigned');
    });

    it('trusts nothing when the connection has no certificate', async () => {
      const { request, requestId } = await signIn();
      const err = await rejection(
        samlValidate(
          { ...cfg, idpCertificate: '' },
          { SAMLResponse: idp.response(request, SP, { email: 'ada@acme.test' }) },
          { requestId },
        ),
      );
      expect((err as SsoFailure).code).to.equal('SSO_ASSERTION_INVALID');
    });
  });

  describe('spMetadataXml', () => {
    it('names the SP entity id and the ACS of the HTTP-POST binding, and wants signed assertions', () => {
      const xml = spMetadataXml({ spEntityId: SP, acsUrl: ACS });
      expect(xml).to.include(`entityID="${SP}"`);
      expect(xml).to.match(
        new RegExp(`Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"[^>]*Location="${ACS}"`),
      );
      expect(xml).to.include('WantAssertionsSigned="true"');
    });
  });
});
