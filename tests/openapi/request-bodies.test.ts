// Test tier: server
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';

type Json = Record<string, any>;

const doc: Json = JSON.parse(JSON.stringify(buildOpenApiDocument()));

function deref(node: Json): Json {
  for (let i = 0; i < 8 && typeof node?.$ref === 'string'; i++) {
    node = node.$ref
      .slice(2)
      .split('/')
      .map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((acc: Json, key: string) => acc?.[key], doc);
  }
  return node;
}

/** The operations whose request may carry a JSON body: POST, PUT, PATCH, and a DELETE that declares one. */
function bodyOperations(): { method: string; path: string; op: Json }[] {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (['post', 'put', 'patch'].includes(method) || (method === 'delete' && op.requestBody))
        out.push({ method, path, op });
    }
  }
  return out;
}

/** Every object schema of a request body, nested ones included, that does not refuse unknown fields. */
function openObjects(schema: Json, where: string, out: string[], seen = new Set<Json>()): void {
  schema = deref(schema);
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return;
  seen.add(schema);
  const isObject = schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object'));
  // A map (`additionalProperties: {schema}`) states what it takes; `true` or nothing says "anything".
  if ((isObject || schema.properties) && (schema.additionalProperties ?? true) === true)
    out.push(where || '/');
  for (const [name, prop] of Object.entries((schema.properties ?? {}) as Json))
    openObjects(prop, `${where}/${name}`, out, seen);
  if (schema.items) openObjects(schema.items, `${where}[]`, out, seen);
  if (typeof schema.additionalProperties === 'object')
    openObjects(schema.additionalProperties, `${where}/*`, out, seen);
  for (const key of ['anyOf', 'oneOf', 'allOf'])
    for (const [i, sub] of ((schema[key] ?? []) as Json[]).entries())
      openObjects(sub, `${where}(${key} ${i})`, out, seen);
}

describe('request bodies: the document states what the server enforces', () => {
  it('every operation that reads a body declares one, and every object in it refuses unknown fields', () => {
    const problems: string[] = [];
    for (const { method, path, op } of bodyOperations()) {
      const label = `${method.toUpperCase()} ${path}`;
      const schema = op.requestBody?.content?.['application/json']?.schema;
      if (!schema) {
        problems.push(`${label}: no request body declared (the server reads one when it is sent)`);
        continue;
      }
      const open: string[] = [];
      openObjects(schema, '', open);
      for (const where of open) problems.push(`${label}: ${where} has no additionalProperties: false`);
    }
    expect(problems).to.deep.equal([]);
  });

  it('every body operation refuses an unknown field with 400 naming it, as its document says', async function () {
    this.timeout(60_000);
    const s = await sharedServer();
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const unknownField = 'x_unknown_field';
    const wrong: string[] = [];
    for (const { method, path } of bodyOperations()) {
      // Ids that exist nowhere: the body is checked before any id is looked up.
      const url = `/v1${path.replace(/\{[^}]+\}/g, 'x_1')}`;
      const res = await http(s.baseUrl, method.toUpperCase(), url, {
        token: owner.token,
        body: { [unknownField]: 1 },
      });
      const details = (res.body?.error?.details ?? []) as { path: string; message: string }[];
      if (
        res.status !== 400 ||
        res.body.error.code !== 'VALIDATION_ERROR' ||
        !details.some((d) => d.path === unknownField && d.message === 'Unknown field')
      )
        wrong.push(`${method.toUpperCase()} ${path} → ${res.status} ${res.text.slice(0, 200)}`);
    }
    expect(wrong).to.deep.equal([]);
  });
});
