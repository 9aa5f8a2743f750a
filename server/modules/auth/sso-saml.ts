import { X509Certificate } from 'node:crypto';
import { DOMParser } from '@xmldom/xmldom';
import { validation } from '../../lib/errors.js';

/** SAML 2.0 namespaces read here. */
const NS = {
  md: 'urn:oasis:names:tc:SAML:2.0:metadata',
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
