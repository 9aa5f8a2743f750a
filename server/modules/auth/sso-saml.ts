import { X509Certificate, randomBytes } from 'node:crypto';
import {
  SAML,
  SamlStatusError,
  ValidateInResponseTo,
  generateServiceProviderMetadata,
  type CacheProvider,
  type Profile,
} from '@node-saml/node-saml';
import { DOMParser } from '@xmldom/xmldom';
import { validation } from '../../lib/errors.js';
import { SsoFailure } from './sso-errors.js';

/** SAML 2.0 namespaces read here. */
const NS = {
  md: 'urn:oasis:names:tc:SAML:2.0:metadata',
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  ds: 'http://www.w3.org/2000/09/xmldsig#',
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
} as const;
/** The binding the sign-in request goes out with (docs/sso.md, "SAML"): SP-initiated, HTTP-Redirect. */
export const HTTP_REDIRECT_BINDING = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
export const HTTP_POST_BINDING = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';

/** Metadata of an IdP is a few kilobytes (tens with several certificates); more is refused before parsing. */
export const MAX_METADATA_CHARS = 256 * 1024;

/** What the sign-in needs from an IdP's metadata. */
export interface IdpMetadata {
  entityId: string;
  /** The IdP's single sign-on URL of the HTTP-Redirect binding. */
  ssoUrl: string;
  /** Its signing certificates, as PEM text (one or more while it rolls its key over). */
  certificates: string[];
}

/** Where a URL of the IdP may point: https, or http on loopback where private targets are allowed (tests). */
export interface IdpUrlPolicy {
  allowInsecure?: boolean;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * The IdP's sign-on URL, checked: an absolute https URL, or http on loopback with `allowInsecure` (docs/sso.md,
 * "SAML"). Throws a 400 naming `path`.
 */
export function checkIdpSsoUrl(url: string, policy: IdpUrlPolicy = {}, path = 'idp_sso_url'): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw validation(path, 'must be an absolute URL');
  }
  if (parsed.username || parsed.password) throw validation(path, 'must not carry credentials');
  if (parsed.protocol === 'https:') return parsed.toString();
  if (parsed.protocol === 'http:' && policy.allowInsecure && LOOPBACK_HOSTS.has(parsed.hostname))
    return parsed.toString();
  throw validation(path, 'must be an https:// URL');
}

/**
 * A certificate given as PEM text or as the bare base64 of its DER (as metadata carries it), checked to be an X.509
 * certificate and returned as PEM. Throws a 400 naming `path`.
 */
export function normalizeIdpCertificate(text: string, path = 'idp_certificate'): string {
  const body = text
    .replace(/-----BEGIN CERTIFICATE-----/g, '')
    .replace(/-----END CERTIFICATE-----/g, '')
    .replace(/\s+/g, '');
  if (!body || !/^[A-Za-z0-9+/]+={0,2}$/.test(body)) throw validation(path, 'must be an X.509 certificate');
  const pem = `-----BEGIN CERTIFICATE-----\n${body.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
  try {
    new X509Certificate(pem);
  } catch {
    throw validation(path, 'must be an X.509 certificate (PEM, or the base64 of its DER)');
  }
  return pem;
}

/** SHA-256 fingerprint of a PEM certificate, as `AB:CD:…` (what an IdP's console shows). */
export function certificateFingerprint(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

/**
 * Parses an IdP's metadata (docs/sso.md, "SAML"): its entity id, the single sign-on URL of the HTTP-Redirect binding
 * and its signing certificates. Anything else — a DOCTYPE or entity declaration, more than MAX_METADATA_CHARS, not
 * exactly one IdP, no redirect binding, no certificate — is a 400 on `metadata_xml`.
 */
export function parseIdpMetadata(xml: string, policy: IdpUrlPolicy = {}): IdpMetadata {
  const path = 'metadata_xml';
  if (typeof xml !== 'string' || xml.trim() === '') throw validation(path, 'must be the IdP metadata XML');
  if (xml.length > MAX_METADATA_CHARS)
    throw validation(path, `must be at most ${MAX_METADATA_CHARS} characters`);
  // No document type: entities expanded by a parser are how XML bombs and external reads happen. Metadata never
  // needs one.
  if (/<!DOCTYPE|<!ENTITY/i.test(xml))
    throw validation(path, 'must not contain a DOCTYPE or entity declaration');
  const errors: string[] = [];
  const record = (msg: unknown) => {
    errors.push(String(msg));
  };
  let doc: Document;
  try {
    doc = new DOMParser({
      locator: {},
      errorHandler: { warning: () => undefined, error: record, fatalError: record },
    }).parseFromString(xml, 'text/xml');
  } catch {
    throw validation(path, 'is not well-formed XML');
  }
  if (errors.length > 0 || !doc?.documentElement) throw validation(path, 'is not well-formed XML');

  const root = doc.documentElement;
  if (root.namespaceURI !== NS.md || !['EntityDescriptor', 'EntitiesDescriptor'].includes(root.localName))
    throw validation(path, 'must be a SAML 2.0 EntityDescriptor');
  const idps = elements(root, NS.md, 'IDPSSODescriptor').filter((idp) =>
    (idp.getAttribute('protocolSupportEnumeration') ?? '').split(/\s+/).includes(NS.protocol),
  );
  if (idps.length !== 1)
    throw validation(path, 'must describe exactly one identity provider (IDPSSODescriptor of SAML 2.0)');
  const idp = idps[0]!;
  const entity = idp.parentNode as Element | null;
  const entityId = entity?.getAttribute('entityID')?.trim();
  if (!entityId) throw validation(path, 'has no entityID');

  const redirect = children(idp, NS.md, 'SingleSignOnService').find(
    (s) => s.getAttribute('Binding') === HTTP_REDIRECT_BINDING,
  );
  const location = redirect?.getAttribute('Location')?.trim();
  if (!location)
    throw validation(
      path,
      'has no SingleSignOnService with the HTTP-Redirect binding (SP-initiated sign-in uses it)',
    );
  const ssoUrl = checkIdpSsoUrl(location, policy, path);

  const certificates: string[] = [];
  for (const key of children(idp, NS.md, 'KeyDescriptor')) {
    const use = key.getAttribute('use');
    if (use && use !== 'signing') continue;
    for (const cert of elements(key, NS.ds, 'X509Certificate')) {
      const pem = normalizeIdpCertificate(cert.textContent ?? '', path);
      if (!certificates.includes(pem)) certificates.push(pem);
    }
  }
  if (certificates.length === 0)
    throw validation(path, 'has no signing certificate (KeyDescriptor, X509Certificate)');
  return { entityId, ssoUrl, certificates };
}

function elements(node: Element, ns: string, name: string): Element[] {
  return Array.from(node.getElementsByTagNameNS(ns, name));
}
function children(node: Element, ns: string, name: string): Element[] {
  return Array.from(node.childNodes).filter(
    (c): c is Element =>
      c.nodeType === 1 && (c as Element).namespaceURI === ns && (c as Element).localName === name,
  );
}

/** Every PEM certificate of a text that holds one or more (a connection keeps its IdP's certificates so). */
export function splitCertificates(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
}

// ---------------------------------------------------------------------------------------------------------------
// Sign-in (docs/sso.md, "SAML"): an AuthnRequest sent with the HTTP-Redirect binding, the Response posted back to the
// ACS with the HTTP-POST binding.

/** The service provider's side: both are URLs of this API for one organization. */
export interface SamlSpConfig {
  /** `<PUBLIC_URL>/v1/auth/sso/saml/metadata/<organization id>`: the SP entity id, the audience of assertions. */
  spEntityId: string;
  /** `<PUBLIC_URL>/v1/auth/sso/saml/acs`: where the IdP posts its response, the recipient of assertions. */
  acsUrl: string;
}

/** One organization's SAML connection, as the sign-in uses it. */
export interface SamlConfig extends SamlSpConfig {
  /** The IdP's entity id: the Issuer its assertions must carry (unchecked when absent). */
  idpEntityId?: string | null;
  idpSsoUrl: string;
  /** The IdP's signing certificate(s), PEM; several PEM blocks in one text are each trusted. */
  idpCertificate: string | string[];
}

/** What a valid assertion says of the person signing in. */
export interface SamlIdentity {
  email: string;
  name?: string;
  /** The assertion's ID: the caller refuses it when seen before (the replay cache). */
  assertionId: string;
  /** Until when the assertion is valid: how long the replay cache keeps its ID. */
  notOnOrAfter: Date;
}

const EMAIL_NAME_ID = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
/** Clocks of the IdP and of this API may differ by this much (NotBefore, NotOnOrAfter). */
export const SAML_CLOCK_SKEW_MS = 30_000;
/** A posted response larger than this (base64) is refused before decoding: real ones are a few kilobytes. */
export const MAX_SAML_RESPONSE_CHARS = 256 * 1024;

/** The attributes IdPs name the email with (Okta and Google: `email`; Entra ID: the claim URI; LDAP: `mail`). */
const EMAIL_ATTRIBUTES = [
  'email',
  'mail',
  'emailAddress',
  'urn:oid:0.9.2342.19200300.100.1.3',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
];
const NAME_ATTRIBUTES = [
  'name',
  'displayName',
  'http://schemas.microsoft.com/identity/claims/displayname',
  'urn:oid:2.16.840.1.113730.3.1.241',
];
const GIVEN_NAME_ATTRIBUTES = [
  'firstName',
  'givenName',
  'given_name',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname',
  'urn:oid:2.5.4.42',
];
const SURNAME_ATTRIBUTES = [
  'lastName',
  'surname',
  'sn',
  'family_name',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname',
  'urn:oid:2.5.4.4',
];

/**
 * InResponseTo is checked against the one request this sign-in sent (kept with the sign-in row), not against a
 * process-wide cache: node-saml asks this provider whether a request ID is outstanding.
 */
function oneRequestCache(requestId: string | null): CacheProvider {
  const issuedAt = new Date().toISOString();
  return {
    saveAsync: async () => null,
    getAsync: async (key) => (requestId !== null && key === requestId ? issuedAt : null),
    removeAsync: async () => null,
  };
}

function samlClient(cfg: SamlConfig, requestId: string | null, generateId?: () => string): SAML {
  const certificates = (
    Array.isArray(cfg.idpCertificate) ? cfg.idpCertificate : [cfg.idpCertificate]
  ).flatMap((c) => splitCertificates(c));
  return new SAML({
    entryPoint: cfg.idpSsoUrl,
    issuer: cfg.spEntityId,
    callbackUrl: cfg.acsUrl,
    audience: cfg.spEntityId,
    // An empty list trusts nothing: every response is then refused as unsigned.
    idpCert: certificates.length > 0 ? certificates : ['-'],
    // Signed assertions required (conventions: a signed response around an unsigned assertion is not enough).
    wantAssertionsSigned: true,
    wantAuthnResponseSigned: false,
    validateInResponseTo: ValidateInResponseTo.always,
    cacheProvider: oneRequestCache(requestId),
    acceptedClockSkewMs: SAML_CLOCK_SKEW_MS,
    identifierFormat: EMAIL_NAME_ID,
    // IdPs that require more than a password (two factors) refuse a request for exactly PasswordProtectedTransport.
    disableRequestedAuthnContext: true,
    authnRequestBinding: 'HTTP-Redirect',
    ...(generateId ? { generateUniqueId: generateId } : {}),
  });
}

/**
 * The IdP's URL that starts a sign-in: an AuthnRequest (HTTP-Redirect binding, deflated and unsigned) with
 * `relayState`. `requestId` is the request's ID, kept with the sign-in for the response's InResponseTo.
 */
export async function samlAuthorizeUrl(
  cfg: SamlConfig,
  opts: { relayState: string },
): Promise<{ url: string; requestId: string }> {
  const requestId = `_${randomBytes(20).toString('hex')}`;
  const url = await samlClient(cfg, requestId, () => requestId).getAuthorizeUrlAsync(
    opts.relayState,
    undefined,
    {},
  );
  return { url, requestId };
}

/**
 * Validates a response posted to the ACS (docs/sso.md, "SAML"): the assertion signed by one of the IdP's certificates
 * (the only XML read afterwards is the signed one, so a wrapped assertion is never believed), in response to
 * `expected.requestId`, for this SP (audience), to this ACS (recipient and destination), within its validity. Replay
 * is the caller's check (`assertionId`). Throws SsoFailure: SSO_IDP_ERROR when the IdP answered an error status,
 * SSO_ASSERTION_INVALID for everything else.
 */
export async function samlValidate(
  cfg: SamlConfig,
  body: { SAMLResponse?: unknown },
  expected: { requestId: string | null },
): Promise<SamlIdentity> {
  const posted = body.SAMLResponse;
  if (typeof posted !== 'string' || posted === '') throw refused('the request carries no SAMLResponse');
  if (posted.length > MAX_SAML_RESPONSE_CHARS) throw refused('the SAMLResponse is too large');
  const compact = posted.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) throw refused('the SAMLResponse is not base64');
  const xml = Buffer.from(compact, 'base64').toString('utf8');
  if (/<!DOCTYPE|<!ENTITY/i.test(xml)) throw refused('the response contains a DOCTYPE or entity declaration');
  const response = parseXml(xml);
  if (!response) throw refused('the response is not well-formed XML');
  const root = response.documentElement;
  if (root.namespaceURI !== NS.protocol || root.localName !== 'Response')
    throw refused('this is not a SAML Response');
  const destination = root.getAttribute('Destination');
  if (destination && destination !== cfg.acsUrl)
    throw refused(`the response is addressed to ${destination}, not to this service's ACS`);
  if (expected.requestId === null) throw refused('no request of this sign-in awaits a response');
  if (root.getAttribute('InResponseTo') !== expected.requestId)
    throw refused('the response does not answer the request this sign-in sent (InResponseTo)');

  let profile: Profile | null;
  try {
    ({ profile } = await samlClient(cfg, expected.requestId).validatePostResponseAsync({
      SAMLResponse: compact,
    }));
  } catch (err) {
    if (err instanceof SamlStatusError)
      throw new SsoFailure('SSO_IDP_ERROR', `The identity provider refused the sign-in: ${err.message}`, {
        cause: err,
      });
    throw refused(err instanceof Error ? err.message : 'the response could not be validated', err);
  }
  const assertionXml = profile?.getAssertionXml?.();
  if (!profile || !assertionXml) throw refused('the response carries no assertion');
  // Everything below is read from the signed assertion only.
  const assertion = parseXml(assertionXml)?.documentElement;
  if (!assertion || assertion.localName !== 'Assertion' || assertion.namespaceURI !== NS.assertion)
    throw refused('the signed content is not an assertion');
  const assertionId = assertion.getAttribute('ID');
  if (!assertionId) throw refused('the assertion has no ID');

  const issuer = children(assertion, NS.assertion, 'Issuer')[0]?.textContent?.trim();
  if (cfg.idpEntityId && issuer !== cfg.idpEntityId)
    throw refused(`the assertion was issued by ${issuer ?? 'nobody'}, not by ${cfg.idpEntityId}`);

  const now = Date.now();
  const subject = children(assertion, NS.assertion, 'Subject')[0];
  const confirmations = subject
    ? children(subject, NS.assertion, 'SubjectConfirmation')
        .filter((c) => c.getAttribute('Method') === BEARER)
        .flatMap((c) => children(c, NS.assertion, 'SubjectConfirmationData'))
    : [];
  if (confirmations.length === 0) throw refused('the assertion has no bearer subject confirmation');
  const forUs = confirmations.filter((d) => d.getAttribute('Recipient') === cfg.acsUrl);
  if (forUs.length === 0) throw refused("the assertion's recipient is not this service's ACS");
  const confirmation = forUs.find((d) => {
    const until = instant(d.getAttribute('NotOnOrAfter'));
    const inResponseTo = d.getAttribute('InResponseTo');
    return (
      until !== null &&
      now - SAML_CLOCK_SKEW_MS < until &&
      (inResponseTo === null || inResponseTo === '' || inResponseTo === expected.requestId)
    );
  });
  if (!confirmation) throw refused('the assertion has expired or answers another request');

  const conditions = children(assertion, NS.assertion, 'Conditions')[0];
  const deadlines = [instant(confirmation.getAttribute('NotOnOrAfter'))!];
  const conditionsUntil = instant(conditions?.getAttribute('NotOnOrAfter') ?? null);
  if (conditionsUntil !== null) deadlines.push(conditionsUntil);
  const notOnOrAfter = new Date(Math.min(...deadlines));
  if (now - SAML_CLOCK_SKEW_MS >= notOnOrAfter.getTime()) throw refused('the assertion has expired');

  const email = emailOf(profile);
  if (!email)
    throw refused('the assertion names no email (a NameID of the emailAddress format or an email attribute)');
  const name = nameOf(profile);
  return { email, ...(name ? { name } : {}), assertionId, notOnOrAfter };
}

/** The SP's metadata for the IdP's administrator: entity id, ACS (HTTP-POST), signed assertions wanted. */
export function spMetadataXml(cfg: SamlSpConfig): string {
  return generateServiceProviderMetadata({
    issuer: cfg.spEntityId,
    callbackUrl: cfg.acsUrl,
    identifierFormat: EMAIL_NAME_ID,
    wantAssertionsSigned: true,
  });
}

function refused(reason: string, cause?: unknown): SsoFailure {
  return new SsoFailure(
    'SSO_ASSERTION_INVALID',
    `The identity provider's SAML response was refused: ${reason}`,
    cause === undefined ? undefined : { cause },
  );
}

function parseXml(xml: string): Document | null {
  let failed = false;
  const fail = () => {
    failed = true;
  };
  try {
    const doc = new DOMParser({
      locator: {},
      errorHandler: { warning: () => undefined, error: fail, fatalError: fail },
    }).parseFromString(xml, 'text/xml');
    return failed || !doc?.documentElement ? null : doc;
  } catch {
    return null;
  }
}

function instant(value: string | null): number | null {
  if (!value) return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

function firstString(profile: Profile, names: string[]): string | undefined {
  for (const n of names) {
    const v = profile[n];
    const s = Array.isArray(v) ? v.find((x) => typeof x === 'string') : v;
    if (typeof s === 'string' && s.trim() !== '') return s.trim();
  }
  return undefined;
}

function emailOf(profile: Profile): string | undefined {
  if (profile.nameIDFormat === EMAIL_NAME_ID && EMAIL.test(profile.nameID ?? ''))
    return profile.nameID.trim().toLowerCase();
  const attr = firstString(profile, EMAIL_ATTRIBUTES);
  return attr && EMAIL.test(attr) ? attr.toLowerCase() : undefined;
}

function nameOf(profile: Profile): string | undefined {
  const full = firstString(profile, NAME_ATTRIBUTES);
  if (full && !EMAIL.test(full)) return full.slice(0, 200);
  const given = firstString(profile, GIVEN_NAME_ATTRIBUTES);
  const family = firstString(profile, SURNAME_ATTRIBUTES);
  const joined = [given, family].filter(Boolean).join(' ');
  return joined ? joined.slice(0, 200) : undefined;
}
