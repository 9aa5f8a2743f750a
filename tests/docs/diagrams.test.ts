import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { fencedBlocks, read, ROOT } from './markdown.js';

/**
 * The state diagrams of the guides (README, "Guides") against the code: the statuses of each machine are the enum of
 * its `status` field in the OpenAPI document, which is generated from the Zod schemas the routers answer with, so a
 * status added to the code without its picture fails here, wherever the enum is declared. A transition table
 * exported by a module (`export const …_TRANSITIONS = { from: [to, …] }`) must have each of its edges drawn.
 */

type Json = Record<string, unknown>;

interface Machine {
  /** The `%% machine: <id>` line of its diagram. */
  id: string;
  guide: string;
  /** The operation (GET) whose 200 body holds the resource, and the field holding it (an object or a list). */
  path: string;
  field: string;
}

const MACHINES: Machine[] = [
  { id: 'vpn-connection', guide: 'docs/vpn.md', path: '/vpn/connections/{id}', field: 'connection' },
  {
    id: 'deployment',
    guide: 'docs/sites.md',
    path: '/hosting/sites/{id}/deployments/{deployment_id}',
    field: 'deployment',
  },
  { id: 'database', guide: 'docs/managed-databases.md', path: '/databases/{id}', field: 'database' },
  { id: 'backup', guide: 'docs/managed-databases.md', path: '/databases/{id}/backups', field: 'backups' },
  { id: 'invoice', guide: 'docs/billing.md', path: '/billing/invoices/{id}', field: 'invoice' },
  { id: 'subscription', guide: 'docs/billing.md', path: '/billing/subscription', field: 'subscription' },
  {
    id: 'webhook-delivery',
    guide: 'docs/webhooks.md',
    path: '/webhooks/{id}/deliveries',
    field: 'deliveries',
  },
];

const doc = buildOpenApiDocument() as unknown as Json;

function resolve(schema: Json): Json {
  let s = schema;
  while (typeof s.$ref === 'string') {
    s = s.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce<Json>((node, key) => node[key] as Json, doc);
  }
  return s;
}

/** The properties of an object schema, through `$ref`, `allOf`, `anyOf` and `oneOf`. */
function properties(schema: Json): Record<string, Json> {
  const s = resolve(schema);
  const own = (s.properties ?? {}) as Record<string, Json>;
  const parts = [
    ...((s.allOf ?? []) as Json[]),
    ...((s.anyOf ?? []) as Json[]),
    ...((s.oneOf ?? []) as Json[]),
  ];
  return Object.assign({}, ...parts.map(properties), own) as Record<string, Json>;
}

/** The enum of the resource's `status`, as the API answers it. */
function statusEnum(m: Machine): string[] {
  const paths = doc.paths as Record<string, Record<string, Json>>;
  const op = paths[m.path]?.get;
  expect(op, `GET ${m.path} in the OpenAPI document`).to.not.equal(undefined);
  const body = ((op!.responses as Json)['200'] as Json).content as Record<string, Json>;
  let field = resolve(properties(body['application/json']!.schema as Json)[m.field]!);
  if (field.type === 'array') field = resolve(field.items as Json);
  const status = resolve(properties(field).status!);
  const values = (status.enum ?? []) as string[];
  expect(values, `the status enum of ${m.field} in GET ${m.path}`).to.not.be.empty;
  return values;
}

interface Diagram {
  states: Set<string>;
  edges: Set<string>;
}

/** The states and edges of a `stateDiagram-v2` block (`[*]` is the start and end, not a state). */
function parseDiagram(body: string): Diagram {
  const states = new Set<string>();
  const edges = new Set<string>();
  for (const raw of body.split('\n')) {
    const line = raw.trim();
    const t = /^([\w[\]*]+)\s*-->\s*([\w[\]*]+)\s*(?::.*)?$/.exec(line);
    if (t) {
      for (const s of [t[1]!, t[2]!]) if (s !== '[*]') states.add(s);
      edges.add(`${t[1]} --> ${t[2]}`);
      continue;
    }
    const d = /^state\s+(?:"[^"]*"\s+as\s+)?(\w+)/.exec(line);
    if (d) states.add(d[1]!);
  }
  return { states, edges };
}

function diagramOf(m: Machine): Diagram {
  const blocks = fencedBlocks(read(m.guide), 'mermaid').filter((b) =>
    new RegExp(`^\\s*%% machine: ${m.id}\\s*$`, 'm').test(b.body),
  );
  expect(blocks, `${m.guide} has one diagram marked "%% machine: ${m.id}"`).to.have.length(1);
  expect(blocks[0]!.body.trim().split('\n')[0]!.trim()).to.equal('stateDiagram-v2');
  return parseDiagram(blocks[0]!.body);
}

/** Files under server/modules that export a transition table, and the tables they export. */
async function transitionTables(): Promise<{ file: string; name: string; edges: [string, string][] }[]> {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts')) files.push(p);
    }
  };
  walk(join(ROOT, 'server', 'modules'));
  const out: { file: string; name: string; edges: [string, string][] }[] = [];
  for (const file of files) {
    const names = [...readFileSync(file, 'utf8').matchAll(/export const (\w*TRANSITIONS)\b/gi)].map(
      (m) => m[1]!,
    );
    if (names.length === 0) continue;
    const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    for (const name of names) {
      const table = mod[name];
      const edges: [string, string][] = [];
      const entries =
        table instanceof Map
          ? [...table.entries()]
          : Object.entries((table ?? {}) as Record<string, unknown>);
      for (const [from, tos] of entries) {
        for (const to of (tos instanceof Set ? [...tos] : (tos as unknown[])) ?? [])
          edges.push([from, String(to)]);
      }
      out.push({ file: relative(ROOT, file), name, edges });
    }
  }
  return out;
}

describe('State diagrams of the guides', () => {
  for (const m of MACHINES) {
    it(`${m.guide} draws every status of ${m.id}, and no other`, () => {
      const statuses = statusEnum(m);
      const { states } = diagramOf(m);
      const missing = statuses.filter((s) => !states.has(s));
      const unknown = [...states].filter((s) => !statuses.includes(s));
      expect(missing, `statuses of ${m.id} missing from its diagram in ${m.guide}`).to.deep.equal([]);
      expect(unknown, `states drawn in ${m.guide} that ${m.id} does not have`).to.deep.equal([]);
    });
  }

  it('every transition table of the code is drawn edge by edge', async () => {
    const problems: string[] = [];
    for (const table of await transitionTables()) {
      const states = new Set(table.edges.flat());
      const machine = MACHINES.find((m) => [...states].every((s) => statusEnum(m).includes(s)));
      if (!machine) {
        problems.push(`${table.file}: ${table.name} matches no diagram (add its machine to this test)`);
        continue;
      }
      const { edges } = diagramOf(machine);
      for (const [from, to] of table.edges) {
        if (!edges.has(`${from} --> ${to}`)) {
          problems.push(`${table.file}: ${table.name} allows ${from} → ${to}, not drawn in ${machine.guide}`);
        }
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  it('the architecture guide draws the processes, PostgreSQL, Redis, the jobs and the drivers', () => {
    const blocks = fencedBlocks(read('docs/architecture.md'), 'mermaid');
    expect(blocks).to.have.length.greaterThan(0);
    const body = blocks[0]!.body;
    for (const word of ['PostgreSQL', 'Redis', 'Job', 'Drivers', 'process']) expect(body).to.include(word);
  });

  it('reads a diagram as mermaid does', () => {
    const d = parseDiagram(
      'stateDiagram-v2\n  %% machine: x\n  [*] --> a: start\n  a --> b: go: now\n  b --> a\n  state c\n  b --> [*]',
    );
    expect([...d.states].sort()).to.deep.equal(['a', 'b', 'c']);
    expect([...d.edges]).to.include.members(['a --> b', 'b --> a', '[*] --> a', 'b --> [*]']);
  });
});
