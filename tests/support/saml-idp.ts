import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { DOMParser, XMLSerializer } from '@xmldom/xmldom';
import { SignedXml } from 'xml-crypto';

/**
 * A SAML identity provider for tests: reads the AuthnRequest of a sign-in URL (HTTP-Redirect binding) and builds the
 * Response its browser would post to the ACS, signed with xml-crypto by a key made for the test run, or spoiled in
 * the ways an attacker or a misconfigured IdP would (unsigned, another key, signature wrapping, wrong audience or
 * recipient, expired, replayed, answering another request).
 */

const SAMLP = 'urn:oasis:names:tc:SAML:2.0:protocol';
const SAML = 'urn:oasis:names:tc:SAML:2.0:assertion';
const DS = 'http://www.w3.org/2000/09/xmldsig#';
export const EMAIL_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
export const UNSPECIFIED_FORMAT = 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified';

export interface TestKeyPair {
  /** PKCS#8 PEM. Made for the test run only, never used elsewhere. */
  privateKey: string;
  /** Self-signed X.509 certificate, PEM. */
  certificate: string;
}

const keyCache = new Map<string, TestKeyPair>();

/** A test-only RSA key and its self-signed certificate, made once per name and process with openssl. */
export function testKeyPair(name = 'idp'): TestKeyPair {
  const cached = keyCache.get(name);
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'saml-idp-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-sha256',
        '-days',
        '2',
        '-subj',
        `/CN=test-${name}`,
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const pair = {
      privateKey: readFileSync(join(dir, 'key.pem'), 'utf8'),
      certificate: readFileSync(join(dir, 'cert.pem'), 'utf8'),
    };
    keyCache.set(name, pair);
    return pair;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The base64 of a certificate's DER, as metadata and KeyInfo carry it. */
export function certificateBody(pem: string): string {
  return pem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, '');
}

/** What the sign-in URL carries: the AuthnRequest and the RelayState. */
export interface ParsedAuthnRequest {
  id: string;
  acsUrl: string | null;
  issuer: string | null;
  destination: string | null;
  relayState: string | null;
  xml: string;
}

/** Reads a URL of the HTTP-Redirect binding: SAMLRequest is base64 of the deflated AuthnRequest. */
export function parseRedirectRequest(url: string): ParsedAuthnRequest {
  const u = new URL(url);
  const encoded = u.searchParams.get('SAMLRequest');
  if (!encoded) throw new Error(`no SAMLRequest in ${url}`);
  const xml = inflateRawSync(Buffer.from(encoded, 'base64')).toString('utf8');
  const root = new DOMParser().parseFromString(xml, 'text/xml').documentElement;
  if (!root || root.localName !== 'AuthnRequest' || root.namespaceURI !== SAMLP)
    throw new Error('SAMLRequest is not an AuthnRequest');
  const issuer = root.getElementsByTagNameNS(SAML, 'Issuer')[0]?.textContent ?? null;
  return {
    id: root.getAttribute('ID')!,
    acsUrl: root.getAttribute('AssertionConsumerServiceURL'),
    issuer,
    destination: root.getAttribute('Destination'),
    relayState: u.searchParams.get('RelayState'),
    xml,
  };
}

/** The ways a response can be spoiled to test the SP's checks (XSW: XML signature wrapping). */
export type Wrapping =
  /** An unsigned evil assertion is the Response's assertion; the signed one is moved inside it. */
  | 'signed-inside-evil'
  /** The evil assertion is put before the signed one, both children of the Response. */
  | 'evil-sibling-before'
  /** The evil assertion is put after the signed one, both children of the Response. */
  | 'evil-sibling-after'
  /** The signed assertion is moved into the Response's Extensions; an unsigned evil one takes its place. */
  | 'signed-in-extensions'
  /** The evil assertion carries the original's Signature; the signed original moves into the Signature's Object. */
  | 'signed-in-signature-object'
  /** The evil assertion takes the signed one's ID, holds its Signature, and the signed one is moved into it. */
  | 'evil-same-id'
  /**
   * The signed Response is moved into the Extensions of an evil Response (a copy with an unsigned evil assertion)
   * that becomes the document (sign it with `sign: 'response'` or `'both'`).
   */
  | 'response-in-extensions'
  /** A comment is put inside the signed NameID: XML canonicalization drops it, so the signature still verifies. */
  | 'comment-in-name-id';

export interface ResponseOptions {
  email?: string;
  nameIdFormat?: string;
  /** Extra attributes (name → one value or several). */
  attributes?: Record<string, string | string[]>;
  /** What is signed: the assertion (the default), the response, both, or nothing. */
  sign?: 'assertion' | 'response' | 'both' | 'none';
  /** Sign with this key pair instead of the IdP's own (its certificate is then not the one the SP trusts). */
  signingKey?: TestKeyPair;
  audience?: string;
  recipient?: string;
  destination?: string | null;
  inResponseTo?: string | null;
  /** The SubjectConfirmationData's InResponseTo, when it should differ from the Response's. */
  subjectInResponseTo?: string | null;
  issuer?: string;
  assertionId?: string;
  now?: Date;
  notBefore?: Date;
  notOnOrAfter?: Date;
  /** A failure status instead of an assertion (e.g. `urn:oasis:names:tc:SAML:2.0:status:Responder`). */
  status?: { code: string; message?: string };
  wrap?: Wrapping;
  /** The email of the evil assertion used by `wrap`. */
  evilEmail?: string;
}

export interface SamlTestIdpOptions {
  entityId?: string;
  ssoUrl?: string;
  key?: TestKeyPair;
}

/** A test IdP with its own key: metadata for the SP, responses for AuthnRequests. */
export class SamlTestIdp {
  readonly entityId: string;
  readonly ssoUrl: string;
  readonly key: TestKeyPair;

  constructor(opts: SamlTestIdpOptions = {}) {
    this.entityId = opts.entityId ?? 'https://idp.example.test/saml';
    this.ssoUrl = opts.ssoUrl ?? 'https://idp.example.test/sso';
    this.key = opts.key ?? testKeyPair('idp');
  }

  get certificate(): string {
    return this.key.certificate;
  }

  /** IdP metadata: entity id, signing certificate, sign-on URLs of both bindings. */
  metadataXml(extraCertificates: string[] = []): string {
    const keys = [this.key.certificate, ...extraCertificates]
      .map(
        (pem) =>
          `<md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="${DS}"><ds:X509Data><ds:X509Certificate>` +
          `${certificateBody(pem)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`,
      )
      .join('\n    ');
    return `<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${esc(this.entityId)}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="${SAMLP}">
    ${keys}
    <md:NameIDFormat>${EMAIL_FORMAT}</md:NameIDFormat>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${esc(this.ssoUrl)}"/>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${esc(this.ssoUrl)}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;
  }

  /**
   * The Response to an AuthnRequest, as XML. `spEntityId` is the audience (the SP's entity id); the recipient and
   * destination default to the request's ACS URL.
   */
  responseXml(request: ParsedAuthnRequest, spEntityId: string, opts: ResponseOptions = {}): string {
    const now = opts.now ?? new Date();
    const acs = request.acsUrl ?? '';
    const notBefore = opts.notBefore ?? new Date(now.getTime() - 60_000);
    const notOnOrAfter = opts.notOnOrAfter ?? new Date(now.getTime() + 5 * 60_000);
    const inResponseTo = opts.inResponseTo === undefined ? request.id : opts.inResponseTo;
    const subjectInResponseTo =
      opts.subjectInResponseTo === undefined ? inResponseTo : opts.subjectInResponseTo;
    const responseId = newId();
    const issuer = opts.issuer ?? this.entityId;
    const destination = opts.destination === undefined ? acs : opts.destination;
    const attrs = (name: string, value: string | null | undefined) =>
      value === null || value === undefined ? '' : ` ${name}="${esc(value)}"`;

    let body: string;
    if (opts.status) {
      body =
        `<samlp:Status><samlp:StatusCode Value="${esc(opts.status.code)}"/>` +
        (opts.status.message
          ? `<samlp:StatusMessage>${esc(opts.status.message)}</samlp:StatusMessage>`
          : '') +
        `</samlp:Status>`;
    } else {
      const assertion = this.assertionXml({
        id: opts.assertionId ?? newId(),
        issuer,
        email: opts.email ?? 'someone@example.test',
        nameIdFormat: opts.nameIdFormat ?? EMAIL_FORMAT,
        recipient: opts.recipient ?? acs,
        inResponseTo: subjectInResponseTo,
        audience: opts.audience ?? spEntityId,
        now,
        notBefore,
        notOnOrAfter,
        attributes: opts.attributes ?? {},
      });
      body = `<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>${assertion}`;
    }
    let xml =
      `<samlp:Response xmlns:samlp="${SAMLP}" xmlns:saml="${SAML}" ID="${responseId}" Version="2.0" ` +
      `IssueInstant="${now.toISOString()}"${attrs('Destination', destination)}${attrs('InResponseTo', inResponseTo)}>` +
      `<saml:Issuer>${esc(issuer)}</saml:Issuer>${body}</samlp:Response>`;

    const key = opts.signingKey ?? this.key;
    const sign = opts.sign ?? 'assertion';
    if (!opts.status && (sign === 'assertion' || sign === 'both')) xml = signElement(xml, 'Assertion', key);
    if (opts.wrap && opts.wrap !== 'response-in-extensions') xml = wrap(xml, opts.wrap, opts.evilEmail);
    if (sign === 'response' || sign === 'both') xml = signElement(xml, 'Response', key);
    if (opts.wrap === 'response-in-extensions') xml = wrap(xml, opts.wrap, opts.evilEmail);
    return xml;
  }

  /** The Response, base64 as the HTTP-POST binding's SAMLResponse field carries it. */
  response(request: ParsedAuthnRequest, spEntityId: string, opts: ResponseOptions = {}): string {
    return Buffer.from(this.responseXml(request, spEntityId, opts), 'utf8').toString('base64');
  }

  private assertionXml(a: {
    id: string;
    issuer: string;
    email: string;
    nameIdFormat: string;
    recipient: string;
    inResponseTo: string | null;
    audience: string;
    now: Date;
    notBefore: Date;
    notOnOrAfter: Date;
    attributes: Record<string, string | string[]>;
  }): string {
    const attributes = Object.entries(a.attributes)
      .map(
        ([name, value]) =>
          `<saml:Attribute Name="${esc(name)}">` +
          (Array.isArray(value) ? value : [value])
            .map((v) => `<saml:AttributeValue>${esc(v)}</saml:AttributeValue>`)
            .join('') +
          `</saml:Attribute>`,
      )
      .join('');
    return (
      `<saml:Assertion xmlns:saml="${SAML}" ID="${esc(a.id)}" Version="2.0" IssueInstant="${a.now.toISOString()}">` +
      `<saml:Issuer>${esc(a.issuer)}</saml:Issuer>` +
      `<saml:Subject><saml:NameID Format="${esc(a.nameIdFormat)}">${esc(a.email)}</saml:NameID>` +
      `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer">` +
      `<saml:SubjectConfirmationData${a.inResponseTo === null ? '' : ` InResponseTo="${esc(a.inResponseTo)}"`} ` +
      `NotOnOrAfter="${a.notOnOrAfter.toISOString()}" Recipient="${esc(a.recipient)}"/>` +
      `</saml:SubjectConfirmation></saml:Subject>` +
      `<saml:Conditions NotBefore="${a.notBefore.toISOString()}" NotOnOrAfter="${a.notOnOrAfter.toISOString()}">` +
      `<saml:AudienceRestriction><saml:Audience>${esc(a.audience)}</saml:Audience></saml:AudienceRestriction>` +
      `</saml:Conditions>` +
      `<saml:AuthnStatement AuthnInstant="${a.now.toISOString()}" SessionIndex="${newId()}"><saml:AuthnContext>` +
      `<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport` +
      `</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
      (attributes ? `<saml:AttributeStatement>${attributes}</saml:AttributeStatement>` : '') +
      `</saml:Assertion>`
    );
  }
}

function newId(): string {
  return `_${randomBytes(16).toString('hex')}`;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** An enveloped RSA-SHA256 signature of the (first) element named `local`, placed after its Issuer. */
function signElement(xml: string, local: 'Assertion' | 'Response', key: TestKeyPair): string {
  const select = `//*[local-name(.)='${local}']`;
  const sig = new SignedXml({
    privateKey: key.privateKey,
    publicCert: key.certificate,
    signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  });
  sig.addReference({
    xpath: select,
    digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256',
    transforms: [
      'http://www.w3.org/2000/09/xmldsig#enveloped-signature',
      'http://www.w3.org/2001/10/xml-exc-c14n#',
    ],
  });
  sig.computeSignature(xml, {
    prefix: 'ds',
    location: { reference: `${select}/*[local-name(.)='Issuer']`, action: 'after' },
  });
  return sig.getSignedXml();
}

/** Applies a signature-wrapping variant to a Response whose assertion (or itself) is signed. */
function wrap(xml: string, how: Wrapping, evilEmail = 'attacker@evil.test'): string {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  const response = doc.documentElement;
  const signed = response.getElementsByTagNameNS(SAML, 'Assertion')[0]!;
  const evil = signed.cloneNode(true) as Element;
  // The evil copy: another subject, no signature, a fresh ID (unless the variant keeps the ID).
  for (const s of Array.from(evil.getElementsByTagNameNS(DS, 'Signature'))) s.parentNode!.removeChild(s);
  evil.setAttribute('ID', newId());
  evil.getElementsByTagNameNS(SAML, 'NameID')[0]!.textContent = evilEmail;
  const extensions = () => {
    const ext = doc.createElementNS(SAMLP, 'samlp:Extensions');
    const issuer = response.getElementsByTagNameNS(SAML, 'Issuer')[0]!;
    response.insertBefore(ext, issuer.nextSibling);
    return ext;
  };
  switch (how) {
    case 'signed-inside-evil':
      response.replaceChild(evil, signed);
      evil.appendChild(signed);
      break;
    case 'evil-sibling-before':
      response.insertBefore(evil, signed);
      break;
    case 'evil-sibling-after':
      response.appendChild(evil);
      break;
    case 'signed-in-extensions':
      response.replaceChild(evil, signed);
      extensions().appendChild(signed);
      break;
    case 'response-in-extensions': {
      const evilResponse = response.cloneNode(true) as Element;
      evilResponse.setAttribute('ID', newId());
      for (const s of Array.from(evilResponse.getElementsByTagNameNS(DS, 'Signature')))
        s.parentNode!.removeChild(s);
      for (const a of Array.from(evilResponse.getElementsByTagNameNS(SAML, 'Assertion'))) {
        a.setAttribute('ID', newId());
        a.getElementsByTagNameNS(SAML, 'NameID')[0]!.textContent = evilEmail;
      }
      const ext = doc.createElementNS(SAMLP, 'samlp:Extensions');
      const issuer = evilResponse.getElementsByTagNameNS(SAML, 'Issuer')[0]!;
      evilResponse.insertBefore(ext, issuer.nextSibling);
      doc.replaceChild(evilResponse, response);
      ext.appendChild(response);
      break;
    }
    case 'signed-in-signature-object': {
      const signature = signed.getElementsByTagNameNS(DS, 'Signature')[0]!;
      signed.removeChild(signature);
      const object = doc.createElementNS(DS, 'ds:Object');
      object.appendChild(signed);
      signature.appendChild(object);
      evil.insertBefore(signature, evil.getElementsByTagNameNS(SAML, 'Subject')[0]!);
      response.appendChild(evil);
      break;
    }
    case 'evil-same-id': {
      const signature = signed.getElementsByTagNameNS(DS, 'Signature')[0]!;
      evil.setAttribute('ID', signed.getAttribute('ID')!);
      response.replaceChild(evil, signed);
      evil.insertBefore(signature.cloneNode(true), evil.getElementsByTagNameNS(SAML, 'Subject')[0]!);
      evil.appendChild(signed);
      break;
    }
    case 'comment-in-name-id': {
      // The IdP vouched for `<local>@<domain>.evil.test`; the comment cuts it so that a reader of the first text
      // node would see `<local>@<domain>`.
      const nameId = signed.getElementsByTagNameNS(SAML, 'NameID')[0]!;
      const value = nameId.textContent ?? '';
      const cut = value.lastIndexOf('.evil.test');
      if (cut < 0) throw new Error('comment-in-name-id needs an email ending in .evil.test');
      while (nameId.firstChild) nameId.removeChild(nameId.firstChild);
      nameId.appendChild(doc.createTextNode(value.slice(0, cut)));
      nameId.appendChild(doc.createComment(''));
      nameId.appendChild(doc.createTextNode(value.slice(cut)));
      break;
    }
  }
  return new XMLSerializer().serializeToString(doc);
}
