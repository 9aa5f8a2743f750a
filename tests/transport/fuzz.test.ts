// Test tier: server
import { expect } from 'chai';
import { ERROR_CODES, ERROR_STATUS, type ErrorCode } from '../../server/lib/errors.js';
import { createOrg, uniqueEmail, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { LEAK_PATTERN } from './envelope.js';
import { rawRequest, type RawResult } from './raw.js';

/**
 * A small generated fuzz run: every operation of the OpenAPI document, with each of a list of hostile values put in
 * each of its path parameters, query parameters and body fields (and as the whole body), the other inputs valid,
 * sent with an owner's token. Whatever the value, the answer is never a 5xx, and every error is the envelope with
 * `request_id` equal to the `X-Request-Id` header. Operations added later are covered without changing this file.
 */

type Schema = Record<string, any>;

interface Hostile {
  label: string;
  /** As JSON text in a body (raw, so that `1e309`, `-0` and `__proto__` keys arrive as written). */
  json: string;
  /** As a query value (already percent-encoded); several values repeat the key; none is left out. */
  query: string[];
  /** As a path segment (already percent-encoded). */
  path: string;
}

/** Percent-encodes each UTF-16 code unit's bytes as WTF-8 would, so lone surrogates survive into the URL. */
function pct(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    let out = '';
    for (const ch of s) {
      const cp = ch.codePointAt(0)!;
      out +=
        cp >= 0xd800 && cp <= 0xdfff
          ? [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)]
              .map((b) => `%${b.toString(16).toUpperCase()}`)
              .join('')
          : encodeURIComponent(ch);
    }
    return out;
  }
}

const str = (label: string, s: string): Hostile => ({
  label,
  json: JSON.stringify(s),
  query: [pct(s)],
  path: pct(s),
});
const num = (label: string, text: string): Hostile => ({ label, json: text, query: [text], path: text });
const json = (label: string, text: string, query: string[] = [pct(text)]): Hostile => ({
  label,
  json: text,
  query,
  path: pct(text),
});

const HOSTILE: Hostile[] = [
  str('NUL', `a\u0000b`),
  str('NUL alone', '\u0000'),
  str('lone high surrogate', 'a\ud800'),
  str('lone low surrogate', '\udc00z'),
  str('huge string', 'x'.repeat(200_000)),
  str('3,000 characters', 'y'.repeat(3000)),
  str('empty string', ''),
  str('spaces', '   '),
  str('control characters', '\t\r\n\u0001\u001f\u007f'),
  str('right-to-left override', 'abc\u202edef'),
  str('zero-width and BOM', '\u200b\ufeff'),
  str('emoji', '\u{1F600}\u{1F468}\u200d\u{1F469}'),
  str('combining marks', 'e\u0301\u0301\u0301'),
  str('path traversal', '../../etc/passwd'),
  str('percent sequences', '%00%E0%A4%A%2e%2e'),
  str('markup', '<script>alert(1)</script>'),
  str('template', '${jndi:ldap://x}{{7*7}}'),
  str('quote and comment', `'"; --`),
  str('number-like', '1e309'),
  str('keyword', '__proto__'),
  num('zero', '0'),
  num('negative zero', '-0'),
  num('negative', '-1'),
  num('fraction', '1.5'),
  num('1e309', '1e309'),
  num('-1e309', '-1e309'),
  num('underflow', '1e-400'),
  num('beyond 2^53', '9007199254740993'),
  num('beyond int32', '2147483648'),
  json('true', 'true', ['true']),
  json('null', 'null', ['']),
  json('empty array', '[]', []),
  json('array for a scalar', '["a","b"]', ['a', 'b']),
  json('nested arrays', '[[[]]]'),
  json('empty object', '{}'),
  json('__proto__ key', '{"__proto__":{"polluted":true}}'),
  json('constructor.prototype', '{"constructor":{"prototype":{"polluted":true}}}'),
  json('nested 40 levels', '{"a":'.repeat(40) + '1' + '}'.repeat(40)),
  json('nested 10,000 levels', '['.repeat(10_000) + ']'.repeat(10_000), ['%5B'.repeat(2000)]),
  json('10,000 numbers', `[${Array.from({ length: 10_000 }, (_, i) => i).join(',')}]`, ['1']),
];

/** Path segments that only make sense in a URL. */
const HOSTILE_PATHS: Hostile[] = [
  ['malformed percent-encoding', '%E0%A4%A'],
  ['encoded NUL', '%00'],
  ['encoded surrogate (CESU-8)', '%ED%A0%80'],
  ['encoded traversal', '..%2F..%2Fauth%2Fme'],
  ['dot segments', '%2e%2e'],
  ['encoded slash', 'a%2Fb'],
  ['4,000 characters', 'z'.repeat(4000)],
  ['overlong UTF-8', '%C0%AF'],
  ['plus and space', 'a+b%20c'],
].map(([label, path]) => ({ label: label!, json: '""', query: [path!], path: path! }));

interface Operation {
  method: string;
  /** `/v1/users/{id}` */
  path: string;
  params: { name: string; in: 'path' | 'query'; schema: Schema }[];
  body?: Schema;
}

function operations(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      ops.push({
        method: method.toUpperCase(),
        path: `/v1${path}`,
        params: (op.parameters ?? []).filter((p: any) => p.in === 'path' || p.in === 'query'),
        body: op.requestBody?.content?.['application/json']?.schema,
      });
    }
  }
  return ops;
}

/** A plausible valid value of `schema` (defaults first), for the inputs that are not being fuzzed. */
function sample(schema: Schema, name: string): unknown {
  if ('const' in schema) return schema.const;
  if (schema.default !== undefined) return schema.default;
  if (schema.enum) return schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives)
    return sample(alternatives.find((s: Schema) => s.type !== 'null') ?? alternatives[0], name);
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'string':
      if (schema.format === 'email' || name.includes('email')) return uniqueEmail('fuzz');
      if (schema.format === 'uri' || name === 'url') return 'http://127.0.0.1:9/fuzz';
      if (name.includes('password')) return 'correct-horse-battery';
      return 'fuzz'.padEnd(schema.minLength ?? 4, 'z');
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return true;
    case 'array':
      return schema.items
        ? Array.from({ length: schema.minItems ?? 1 }, () => sample(schema.items, name))
        : [];
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key] ?? {}, key);
      return out;
    }
    default:
      return 'fuzz';
  }
}

/** The body as JSON text, with `field` replaced by the raw hostile JSON. */
function bodyText(base: Record<string, unknown>, field: string, value: string): string {
  const entries = Object.entries(base).filter(([k]) => k !== field);
  return `{${[...entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`), `${JSON.stringify(field)}:${value}`].join(',')}}`;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;
/** Statuses of transport errors that have no code of their own (docs/api-conventions.md "Errors"). */
const TRANSPORT_STATUSES = new Set([408, 414, 431]);

function check(res: RawResult, label: string): void {
  const where = `${label} → ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, where).to.be.within(200, 499);
  const id = res.headers['x-request-id'];
  expect(id, where).to.be.a('string').and.match(REQUEST_ID);
  expect(res.headers['content-type'], where).to.match(/^application\/json/);
  if (res.status < 400) {
    expect(res.body?.success, where).to.equal(true);
    return;
  }
  expect(Object.keys(res.body ?? {}), where).to.have.members(['success', 'error']);
  expect(res.body.success, where).to.equal(false);
  const err = res.body.error;
  expect(
    Object.keys(err).filter((k) => !['code', 'message', 'details', 'request_id'].includes(k)),
  ).to.deep.equal([]);
  expect(ERROR_CODES, where).to.include(err.code);
  expect(res.status, where).to.equal(
    TRANSPORT_STATUSES.has(res.status) ? res.status : ERROR_STATUS[err.code as ErrorCode],
  );
  expect(err.message, where).to.be.a('string').and.not.equal('');
  expect(err.request_id, where).to.equal(id);
  if ('details' in err) expect(err.details, where).to.be.an('array');
  expect(res.text, where).not.to.match(LEAK_PATTERN);
}

describe('fuzz: hostile values in every operation of the OpenAPI document', function () {
  this.timeout(120_000);
  let s: TestServer;
  let owner: TestUser;
  let ops: Operation[];
  /** Real ids for path templates, so that the other inputs of an operation on a resource are reached. */
  const realIds = new Map<string, string>();

  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'enterprise' });
    const doc = await http(s.baseUrl, 'GET', '/v1/openapi.json');
    expect(doc.status).to.equal(200);
    ops = operations(doc.body);
    const conn = await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
      token: owner.token,
      body: { name: 'Fuzz', location: 'eu-central', protocol: 'wireguard' },
    });
    const hook = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: 'http://127.0.0.1:9/fuzz', events: ['user.created'] },
    });
    expect(conn.status, conn.text).to.equal(201);
    expect(hook.status, hook.text).to.equal(201);
    realIds.set('/v1/users/{id}', owner.id);
    realIds.set('/v1/vpn/connections/{id}', conn.body.connection.id);
    realIds.set('/v1/webhooks/{id}', hook.body.webhook.id);
  });

  it('finds the operations', () => {
    expect(ops.length).to.be.greaterThan(20);
    expect(ops.filter((o) => o.body).length).to.be.greaterThan(5);
  });

  it('never answers 5xx, and answers every error in the envelope with its X-Request-Id', async () => {
    // Logging out ends the session the other calls use: last.
    const ordered = [...ops].sort(
      (a, b) => Number(a.path.endsWith('/logout')) - Number(b.path.endsWith('/logout')),
    );
    const requests: { label: string; send(): Promise<RawResult> }[] = [];

    for (const op of ordered) {
      const pathParams = op.params.filter((p) => p.in === 'path');
      const queryParams = op.params.filter((p) => p.in === 'query');
      const url = (override?: { name: string; value: string }, query = '') => {
        let path = op.path;
        for (const p of pathParams) {
          const template = op.path.slice(0, op.path.indexOf(`{${p.name}}`) + p.name.length + 2);
          const value = override?.name === p.name ? override.value : (realIds.get(template) ?? 'zz_missing');
          path = path.replace(`{${p.name}}`, value);
        }
        return `${s.baseUrl}${path}${query ? `?${query}` : ''}`;
      };
      const baseBody = () => (op.body ? (sample(op.body, '') as Record<string, unknown>) : undefined);
      const send = (target: string, body?: string) =>
        rawRequest(target, {
          method: op.method,
          headers: {
            authorization: `Bearer ${owner.token}`,
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          body,
        });
      const defaultBody = () => {
        const b = baseBody();
        return b ? JSON.stringify(b) : undefined;
      };

      for (const p of pathParams) {
        for (const h of [...HOSTILE, ...HOSTILE_PATHS]) {
          requests.push({
            label: `${op.method} ${op.path} path ${p.name} = ${h.label}`,
            send: () => send(url({ name: p.name, value: h.path }), defaultBody()),
          });
        }
      }
      for (const p of queryParams) {
        for (const h of [...HOSTILE, ...HOSTILE_PATHS]) {
          const query = h.query.map((v) => `${encodeURIComponent(p.name)}=${v}`).join('&');
          requests.push({
            label: `${op.method} ${op.path} query ${p.name} = ${h.label}`,
            send: () => send(url(undefined, query)),
          });
        }
      }
      if (op.body) {
        for (const field of Object.keys(op.body.properties ?? {})) {
          for (const h of HOSTILE) {
            requests.push({
              label: `${op.method} ${op.path} body ${field} = ${h.label}`,
              send: () => send(url(), bodyText(baseBody()!, field, h.json)),
            });
          }
        }
        for (const h of HOSTILE) {
          requests.push({
            label: `${op.method} ${op.path} whole body = ${h.label}`,
            send: () => send(url(), h.json),
          });
        }
        // An unknown field named like a prototype key, beside valid fields.
        requests.push({
          label: `${op.method} ${op.path} extra __proto__ field`,
          send: () => send(url(), bodyText(baseBody()!, '__proto__', '{"admin":true}')),
        });
      }
    }

    // A few at a time; operations are kept in order so that logging out stays last.
    const statuses = new Map<number, number>();
    const byOp = new Map<string, typeof requests>();
    for (const r of requests) {
      const key = r.label.split(' ').slice(0, 2).join(' ');
      byOp.set(key, [...(byOp.get(key) ?? []), r]);
    }
    for (const group of byOp.values()) {
      for (let i = 0; i < group.length; i += 6) {
        const batch = group.slice(i, i + 6);
        const results = await Promise.all(batch.map((r) => r.send()));
        results.forEach((res, j) => {
          check(res, batch[j]!.label);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        });
      }
    }
    expect(requests.length).to.be.greaterThan(1000);
    // The valid inputs beside the fuzzed one were reached: some calls succeeded.
    expect(
      [...statuses].filter(([status]) => status < 300).length,
      JSON.stringify([...statuses]),
    ).to.be.greaterThan(0);
  });
});
