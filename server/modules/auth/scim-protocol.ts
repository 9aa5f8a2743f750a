import { createHash } from 'node:crypto';

/**
 * SCIM 2.0's shapes (RFC 7643, RFC 7644) as this API serves them (docs/sso.md, "SCIM provisioning"): the error body,
 * the User resource, the filters and PATCH operations the identity providers send. No database, no HTTP.
 */

export const SCIM_MEDIA_TYPE = 'application/scim+json';
export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const ENTERPRISE_USER_SCHEMA = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const SERVICE_PROVIDER_CONFIG_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig';
export const RESOURCE_TYPE_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ResourceType';
export const SCHEMA_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Schema';

/** The largest page a list answers (`count` above it is lowered to it). */
export const SCIM_MAX_RESULTS = 200;

/** The `scimType` values of RFC 7644 §3.12 this API answers. */
export type ScimType =
  | 'invalidFilter'
  | 'invalidSyntax'
  | 'invalidPath'
  | 'invalidValue'
  | 'mutability'
  | 'uniqueness'
  | 'noTarget';

/** A refusal in SCIM's terms: answered in SCIM's error body with its status (scim.routes.ts). */
export class ScimError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly scimType?: ScimType,
  ) {
    super(detail);
    this.name = 'ScimError';
  }
}

export const scimBadRequest = (scimType: ScimType, detail: string) => new ScimError(400, detail, scimType);

/** SCIM's error body (RFC 7644 §3.12): `status` is a string. */
export function scimErrorBody(status: number, detail: string, scimType?: string) {
  return { schemas: [ERROR_SCHEMA], status: String(status), ...(scimType ? { scimType } : {}), detail };
}

// ---------------------------------------------------------------------------------------------------------------
// The User resource
// ---------------------------------------------------------------------------------------------------------------

/** What SCIM reads and writes of a user: the user row's, and the directory's own fields (scim_users). */
export interface ScimUserModel {
  /** The user's email address, lower-cased. */
  userName: string;
  /** The user's name. */
  displayName: string | null;
  givenName: string | null;
  familyName: string | null;
  /** Set by PATCH or a body's `name.formatted`; the user's name when no `displayName` is given. */
  formatted: string | null;
  /** `emails[].value` as given (the primary one), lower-cased; must be `userName`. */
  email: string | null;
  externalId: string | null;
  active: boolean;
}

export interface ScimUserView extends ScimUserModel {
  id: string;
  created: Date;
  lastModified: Date;
}

/** The user's name from what the directory sent: `displayName`, `name.formatted`, the parts, or the address. */
export function nameOf(m: ScimUserModel): string {
  const parts = [m.givenName, m.familyName].filter((x): x is string => !!x && x.trim() !== '').join(' ');
  const name = m.displayName?.trim() || m.formatted?.trim() || parts || m.userName.split('@')[0]!;
  return name.slice(0, 200);
}

/** The User resource (RFC 7643 §4.1) with its `meta`, and its version (the `ETag`). */
export function userResource(
  v: ScimUserView,
  baseUrl: string,
): { resource: Record<string, unknown>; etag: string } {
  const body: Record<string, unknown> = {
    schemas: [USER_SCHEMA],
    id: v.id,
    ...(v.externalId !== null ? { externalId: v.externalId } : {}),
    userName: v.userName,
    name: {
      formatted: v.displayName ?? v.userName,
      ...(v.givenName !== null ? { givenName: v.givenName } : {}),
      ...(v.familyName !== null ? { familyName: v.familyName } : {}),
    },
    displayName: v.displayName ?? v.userName,
    emails: [{ value: v.userName, type: 'work', primary: true }],
    active: v.active,
  };
  const etag = `W/"${createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 20)}"`;
  body.meta = {
    resourceType: 'User',
    created: v.created.toISOString(),
    lastModified: v.lastModified.toISOString(),
    location: `${baseUrl}/Users/${v.id}`,
    version: etag,
  };
  return { resource: body, etag };
}

// ---------------------------------------------------------------------------------------------------------------
// Reading a body: POST and PUT
// ---------------------------------------------------------------------------------------------------------------

const isObject = (x: unknown): x is Record<string, unknown> =>
  !!x && typeof x === 'object' && !Array.isArray(x);

/** Attribute names are case-insensitive (RFC 7643 §2.1): the value of `name` in `obj`, whatever its case. */
function attr(obj: Record<string, unknown>, name: string): unknown {
  const lower = name.toLowerCase();
  for (const [k, v] of Object.entries(obj)) if (k.toLowerCase() === lower) return v;
  return undefined;
}

function optionalString(value: unknown, path: string, max: number): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw scimBadRequest('invalidValue', `${path} must be a string`);
  if (value.length > max) throw scimBadRequest('invalidValue', `${path} is longer than ${max} characters`);
  return value;
}

/** A boolean, or the strings `"True"` and `"False"` (any case) that Microsoft Entra ID sends. */
export function scimBoolean(value: unknown, path: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw scimBadRequest('invalidValue', `${path} must be true or false`);
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** `userName`: an email address, lower-cased. */
export function checkedUserName(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw scimBadRequest('invalidValue', 'userName is required: the user’s email address');
  }
  const email = value.trim().toLowerCase();
  if (email.length > 320 || !EMAIL.test(email)) {
    throw scimBadRequest('invalidValue', 'userName must be the user’s email address');
  }
  return email;
}

/** The primary (or first) address of `emails`, lower-cased; null when none is given. */
function primaryEmail(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw scimBadRequest('invalidValue', 'emails must be an array');
  const items = value.filter(isObject);
  const chosen = items.find((e) => attr(e, 'primary') === true || attr(e, 'primary') === 'True') ?? items[0];
  const v = chosen ? attr(chosen, 'value') : undefined;
  return typeof v === 'string' ? v.trim().toLowerCase() : null;
}

/** A User resource of a POST or PUT, read into the model; `active` absent is `keepActive`. */
export function modelFromBody(body: unknown, keepActive: boolean): ScimUserModel {
  if (!isObject(body)) throw scimBadRequest('invalidSyntax', 'The body must be a JSON object (a SCIM User)');
  const schemas = attr(body, 'schemas');
  if (schemas !== undefined && (!Array.isArray(schemas) || !schemas.includes(USER_SCHEMA))) {
    throw scimBadRequest('invalidSyntax', `schemas must include ${USER_SCHEMA}`);
  }
  const name = attr(body, 'name');
  if (name !== undefined && name !== null && !isObject(name)) {
    throw scimBadRequest('invalidValue', 'name must be an object');
  }
  const n = isObject(name) ? name : {};
  const active = attr(body, 'active');
  return {
    userName: checkedUserName(attr(body, 'userName')),
    displayName: optionalString(attr(body, 'displayName'), 'displayName', 200),
    givenName: optionalString(attr(n, 'givenName'), 'name.givenName', 200),
    familyName: optionalString(attr(n, 'familyName'), 'name.familyName', 200),
    formatted: optionalString(attr(n, 'formatted'), 'name.formatted', 200),
    email: primaryEmail(attr(body, 'emails')),
    externalId: optionalString(attr(body, 'externalId'), 'externalId', 512),
    active: active === undefined || active === null ? keepActive : scimBoolean(active, 'active'),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// PATCH (RFC 7644 §3.5.2): the operations Okta and Microsoft Entra ID send
// ---------------------------------------------------------------------------------------------------------------

/** A path without the core schema's URN prefix, lower-cased (`urn:…:User:name.givenName` → `name.givenname`). */
function normalizedPath(path: string): string {
  let p = path.trim();
  if (p.toLowerCase().startsWith(`${USER_SCHEMA.toLowerCase()}:`)) p = p.slice(USER_SCHEMA.length + 1);
  return p.toLowerCase().replace(/\s+/g, ' ');
}

/** The paths of `emails` this API knows: the list, its `value`, or the work (or primary) address's `value`. */
const EMAIL_VALUE_PATHS = new Set([
  'emails.value',
  'emails[type eq "work"].value',
  'emails[primary eq true].value',
]);

/** Sets the attribute at `path` (normalized) of the model to `value`, or clears it (`value` undefined). */
function setPath(m: ScimUserModel, path: string, value: unknown, op: string): void {
  const clear = value === undefined;
  switch (path) {
    case 'active':
      if (clear) throw scimBadRequest('mutability', 'active cannot be removed');
      m.active = scimBoolean(value, 'active');
      return;
    case 'username':
      if (clear) throw scimBadRequest('mutability', 'userName cannot be removed');
      m.userName = checkedUserName(value);
      return;
    case 'displayname':
      m.displayName = clear ? null : optionalString(value, 'displayName', 200);
      return;
    case 'externalid':
      m.externalId = clear ? null : optionalString(value, 'externalId', 512);
      return;
    case 'name.givenname':
      m.givenName = clear ? null : optionalString(value, 'name.givenName', 200);
      return;
    case 'name.familyname':
      m.familyName = clear ? null : optionalString(value, 'name.familyName', 200);
      return;
    case 'name.formatted':
      m.formatted = clear ? null : optionalString(value, 'name.formatted', 200);
      return;
    case 'name': {
      if (clear) {
        m.givenName = m.familyName = m.formatted = null;
        return;
      }
      if (!isObject(value)) throw scimBadRequest('invalidValue', 'name must be an object');
      for (const [k, v] of Object.entries(value)) setPath(m, `name.${k.toLowerCase()}`, v, op);
      return;
    }
    case 'emails': {
      if (clear) throw scimBadRequest('mutability', 'emails cannot be removed: the address is the userName');
      const email = primaryEmail(Array.isArray(value) ? value : [value]);
      if (email !== null) m.email = email;
      return;
    }
    default:
      if (EMAIL_VALUE_PATHS.has(path)) {
        if (clear)
          throw scimBadRequest('mutability', 'emails cannot be removed: the address is the userName');
        if (typeof value !== 'string') throw scimBadRequest('invalidValue', 'emails value must be a string');
        m.email = value.trim().toLowerCase();
        return;
      }
      // Attributes this API does not keep (the enterprise extension's, phone numbers, ...) are ignored, as an
      // attribute the service provider does not store is (RFC 7644 §3.5.2); read-only ones alike.
      return;
  }
}

/**
 * Applies a PatchOp body to `model` (a copy is returned): `add`, `replace` and `remove` in any case, with a `path`
 * or, for `add` and `replace`, without one (a value object of attributes, which may be paths themselves:
 * `{"name.givenName": "Ada"}`).
 */
export function applyPatch(model: ScimUserModel, body: unknown): ScimUserModel {
  if (!isObject(body)) throw scimBadRequest('invalidSyntax', 'The body must be a JSON object (a PatchOp)');
  const schemas = attr(body, 'schemas');
  if (!Array.isArray(schemas) || !schemas.includes(PATCH_SCHEMA)) {
    throw scimBadRequest('invalidSyntax', `schemas must be ["${PATCH_SCHEMA}"]`);
  }
  const ops = attr(body, 'Operations');
  if (!Array.isArray(ops) || ops.length === 0) {
    throw scimBadRequest('invalidSyntax', 'Operations must be a non-empty array');
  }
  const m = { ...model };
  for (const [i, raw] of ops.entries()) {
    if (!isObject(raw)) throw scimBadRequest('invalidSyntax', `Operations[${i}] must be an object`);
    const rawOp = attr(raw, 'op');
    const op = typeof rawOp === 'string' ? rawOp.toLowerCase() : '';
    if (op !== 'add' && op !== 'replace' && op !== 'remove') {
      throw scimBadRequest('invalidSyntax', `Operations[${i}].op must be add, replace or remove`);
    }
    const rawPath = attr(raw, 'path');
    const value = attr(raw, 'value');
    if (rawPath !== undefined && typeof rawPath !== 'string') {
      throw scimBadRequest('invalidPath', `Operations[${i}].path must be a string`);
    }
    if (rawPath === undefined || rawPath.trim() === '') {
      if (op === 'remove') throw scimBadRequest('noTarget', `Operations[${i}]: remove needs a path`);
      if (!isObject(value)) {
        throw scimBadRequest('invalidValue', `Operations[${i}].value must be an object of attributes`);
      }
      for (const [k, v] of Object.entries(value)) setPath(m, normalizedPath(k), v, op);
      continue;
    }
    if (op !== 'remove' && value === undefined) {
      throw scimBadRequest('invalidValue', `Operations[${i}].value is required`);
    }
    setPath(m, normalizedPath(rawPath), op === 'remove' ? undefined : value, op);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------------------------
// Filters (RFC 7644 §3.4.2.2): `eq` comparisons joined by `and`
// ---------------------------------------------------------------------------------------------------------------

export interface ScimFilter {
  id?: string;
  userName?: string;
  externalId?: string;
  active?: boolean;
}

/** The attributes a filter may compare, normalized. */
const FILTER_ATTRIBUTES: Record<string, keyof ScimFilter> = {
  id: 'id',
  username: 'userName',
  'emails.value': 'userName',
  'emails[type eq "work"].value': 'userName',
  emails: 'userName',
  externalid: 'externalId',
  active: 'active',
};

/**
 * Reads a filter of `eq` comparisons joined by `and` (`userName eq "ada@example.com" and active eq true`): of
 * `userName`, `emails.value` (or `emails[type eq "work"].value`), `externalId`, `id` and `active`. Anything else is
 * 400 `invalidFilter`. Two comparisons of one attribute with different values match nothing (`null`).
 */
export function parseFilter(text: string): ScimFilter | null {
  const out: ScimFilter = {};
  let impossible = false;
  const re =
    /^\s*((?:urn:ietf:params:scim:schemas:core:2\.0:User:)?[A-Za-z][\w.]*(?:\[\s*type\s+eq\s+"work"\s*\]\.value)?)\s+eq\s+("(?:[^"\\]|\\.)*"|true|false)\s*(?:(and)\s+|$)/i;
  let rest = text;
  for (;;) {
    const m = re.exec(rest);
    if (!m) {
      throw scimBadRequest(
        'invalidFilter',
        'Unsupported filter: use eq comparisons of userName, emails.value, externalId, id or active, joined by and',
      );
    }
    const name = normalizedPath(m[1]!.replace(/\[\s*type\s+eq\s+"work"\s*\]/i, '[type eq "work"]'));
    const key = FILTER_ATTRIBUTES[name];
    if (!key) throw scimBadRequest('invalidFilter', `Unsupported filter attribute: ${m[1]}`);
    const literal = m[2]!;
    let value: string | boolean;
    if (literal.startsWith('"')) {
      try {
        value = JSON.parse(literal) as string;
      } catch {
        throw scimBadRequest('invalidFilter', `Invalid string in the filter: ${literal}`);
      }
    } else value = literal.toLowerCase() === 'true';
    let v: string | boolean;
    if (key === 'active') {
      if (typeof value !== 'boolean')
        throw scimBadRequest('invalidFilter', 'active compares with true or false');
      v = value;
    } else {
      if (typeof value !== 'string') throw scimBadRequest('invalidFilter', `${m[1]} compares with a string`);
      v = key === 'userName' ? value.toLowerCase() : value;
    }
    const prev = out[key];
    if (prev !== undefined && prev !== v) impossible = true;
    (out as Record<string, unknown>)[key] = v;
    rest = rest.slice(m[0].length);
    if (!m[3]) break;
  }
  if (rest.trim() !== '') throw scimBadRequest('invalidFilter', 'Unsupported filter');
  return impossible ? null : out;
}

// ---------------------------------------------------------------------------------------------------------------
// Discovery: ServiceProviderConfig, ResourceTypes, Schemas (RFC 7643 §5–§7)
// ---------------------------------------------------------------------------------------------------------------

export function serviceProviderConfig(baseUrl: string, documentationUri: string) {
  return {
    schemas: [SERVICE_PROVIDER_CONFIG_SCHEMA],
    documentationUri,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: SCIM_MAX_RESULTS },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: true },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'OAuth Bearer Token',
        description:
          'The organization’s SCIM token (POST /v1/organization/scim-token), as Authorization: Bearer',
        primary: true,
      },
    ],
    meta: {
      resourceType: 'ServiceProviderConfig',
      location: `${baseUrl}/ServiceProviderConfig`,
    },
  };
}

export function userResourceType(baseUrl: string) {
  return {
    schemas: [RESOURCE_TYPE_SCHEMA],
    id: 'User',
    name: 'User',
    endpoint: '/Users',
    description: 'A user of the organization',
    schema: USER_SCHEMA,
    schemaExtensions: [],
    meta: { resourceType: 'ResourceType', location: `${baseUrl}/ResourceTypes/User` },
  };
}

const attribute = (
  name: string,
  extra: Partial<{
    type: string;
    mutability: string;
    required: boolean;
    uniqueness: string;
    caseExact: boolean;
    multiValued: boolean;
    returned: string;
    description: string;
    subAttributes: unknown[];
  }> = {},
) => ({
  name,
  type: 'string',
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: 'readWrite',
  returned: 'default',
  uniqueness: 'none',
  ...extra,
});

/** The User schema as this API keeps it: the attributes it stores, with their mutability. */
export function userSchema(baseUrl: string) {
  return {
    schemas: [SCHEMA_SCHEMA],
    id: USER_SCHEMA,
    name: 'User',
    description: 'User Account',
    attributes: [
      attribute('userName', {
        required: true,
        uniqueness: 'server',
        mutability: 'immutable',
        description: 'The user’s email address: unique across the platform, set at creation',
      }),
      attribute('name', {
        type: 'complex',
        description: 'The parts of the user’s name',
        subAttributes: [
          attribute('formatted', { description: 'The user’s full name' }),
          attribute('givenName'),
          attribute('familyName'),
        ],
      }),
      attribute('displayName', { description: 'The user’s name as the API shows it' }),
      attribute('emails', {
        type: 'complex',
        multiValued: true,
        mutability: 'immutable',
        description: 'One address, the userName',
        subAttributes: [
          attribute('value'),
          attribute('type', { mutability: 'immutable' }),
          attribute('primary', { type: 'boolean', mutability: 'immutable' }),
        ],
      }),
      attribute('active', {
        type: 'boolean',
        description: 'false suspends the user (signed out at once); true restores sign-in',
      }),
      attribute('externalId', { caseExact: true, description: 'The directory’s identifier of the user' }),
    ],
    meta: { resourceType: 'Schema', location: `${baseUrl}/Schemas/${USER_SCHEMA}` },
  };
}
