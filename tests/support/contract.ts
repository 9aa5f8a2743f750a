import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ObservedResponse, ResponseObserver } from '../../server/app.js';
import { buildOpenApiDocument } from '../../server/openapi.js';

/**
 * The contract test: every response a test server sends on a `/v1` operation is held to the published OpenAPI
 * document (the one `/v1/openapi.json` serves): its status must be declared for that operation, its declared
 * headers present when required and matching their schema, its media type declared and its body valid against the
 * schema (JSON Schema 2020-12, as OpenAPI 3.1 uses, checked by Ajv). A violation is recorded here; the root hook
 * (tests/support/hooks.ts) fails the test during which it happened.
 */

type Json = Record<string, any>;

// ajv-formats is CommonJS: its default export is the module object under some loaders.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

const DOC_ID = 'openapi.json';

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class ContractValidator {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly doc: Json) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
    addFormats(this.ajv);
    this.ajv.addSchema(doc, DOC_ID);
  }

  /** Follows a local `$ref` to its target, with the JSON pointer of where it was found. */
  private resolve(node: Json, pointer: string): { node: Json; pointer: string } {
    for (let i = 0; i < 8 && typeof node?.$ref === 'string'; i++) {
      const ref: string = node.$ref;
      pointer = ref.slice(1);
      node = ref
        .slice(2)
        .split('/')
        .map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'))
        .reduce((acc: Json, key: string) => acc?.[key], this.doc);
    }
    return { node, pointer };
  }

  private validator(pointer: string): ValidateFunction {
    let fn = this.compiled.get(pointer);
    if (!fn) {
      fn = this.ajv.getSchema(`${DOC_ID}#${pointer}`);
      if (!fn) throw new Error(`no schema at ${pointer}`);
      this.compiled.set(pointer, fn);
    }
    return fn;
  }

  private errorsOf(fn: ValidateFunction, value: unknown): string | undefined {
    if (fn(value)) return undefined;
    return (fn.errors ?? [])
      .slice(0, 5)
      .map(
        (e) =>
          `${e.instancePath || '(root)'} ${e.message ?? ''}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`,
      )
      .join('; ');
  }

  /** The operation a Fastify route answers: `/v1/users/:id` → the document's `/users/{id}`. */
  operationOf(method: string, route: string | undefined): { path: string; op: Json } | undefined {
    if (!route?.startsWith('/v1/')) return undefined;
    const path = route.slice(3).replace(/:(\w+)/g, '{$1}');
    const op = (this.doc.paths?.[path] as Json | undefined)?.[method.toLowerCase()] as Json | undefined;
    return op ? { path, op } : undefined;
  }

  /** What is wrong with this response, by the document; empty when it conforms or is not a documented operation. */
  check(res: ObservedResponse): string[] {
    const found = this.operationOf(res.method, res.route);
    if (!found) return [];
    const { path, op } = found;
    const method = res.method.toLowerCase();
    const where = `${res.method} ${path} → ${res.status}`;
    const declared = op.responses?.[String(res.status)] as Json | undefined;
    if (!declared) {
      const code = res.body ? (safeJson(res.body) as Json | undefined)?.error?.code : undefined;
      return [
        `${where}: status ${res.status}${code ? ` (${code})` : ''} is not declared (declared: ${Object.keys(op.responses ?? {}).join(', ')})`,
      ];
    }
    const problems: string[] = [];
    const base = `/paths/${escapePointer(path)}/${method}/responses/${res.status}`;
    const { node: response, pointer } = this.resolve(declared, base);

    for (const [name, rawHeader] of Object.entries((response.headers ?? {}) as Json)) {
      const { node: header, pointer: hp } = this.resolve(
        rawHeader as Json,
        `${pointer}/headers/${escapePointer(name)}`,
      );
      const value = res.headers[name.toLowerCase()];
      if (value === undefined) {
        if (header.required) problems.push(`${where}: required header ${name} is missing`);
        continue;
      }
      const text = Array.isArray(value) ? value.join(', ') : String(value);
      const schema = header.schema as Json | undefined;
      if (!schema) continue;
      const types = [schema.type].flat();
      const typed = types.includes('integer') || types.includes('number') ? Number(text) : text;
      const errors = this.errorsOf(this.validator(`${hp}/schema`), typed);
      if (errors) problems.push(`${where}: header ${name}: ${errors} (value ${JSON.stringify(text)})`);
    }

    const content = (response.content ?? {}) as Json;
    const contentType = String(res.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (res.body === undefined || res.body === '') {
      if (Object.keys(content).length > 0 && res.method !== 'HEAD')
        problems.push(`${where}: empty body, declared ${Object.keys(content).join(', ')}`);
      return problems;
    }
    if (!(contentType in content)) {
      problems.push(
        `${where}: media type ${contentType || '(none)'} is not declared (${Object.keys(content).join(', ') || 'no content'})`,
      );
      return problems;
    }
    if (contentType === 'application/json') {
      const body = safeJson(res.body);
      if (body === undefined) problems.push(`${where}: body is not JSON`);
      else {
        const errors = this.errorsOf(
          this.validator(`${pointer}/content/${escapePointer(contentType)}/schema`),
          body,
        );
        if (errors) problems.push(`${where}: body: ${errors}`);
      }
    }
    return problems;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

let validator: ContractValidator | undefined;
let violations: string[] = [];

/** The validator of the document the servers serve (the same builder as `/v1/openapi.json`; paths do not depend on the base URL). */
export function contractValidator(): ContractValidator {
  validator ??= new ContractValidator(JSON.parse(JSON.stringify(buildOpenApiDocument())) as Json);
  return validator;
}

/** The observer every in-process test server is built with: records what does not conform. */
export const contractObserver: ResponseObserver = (res) => {
  for (const problem of contractValidator().check(res)) violations.push(problem);
};

/** The violations recorded since the last call. */
export function takeContractViolations(): string[] {
  const out = violations;
  violations = [];
  return out;
}
