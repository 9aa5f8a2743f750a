// Test tier: unit
import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { fencedBlocks, read, ROOT } from './markdown.js';

/**
 * The state diagrams of the guides (README, "Guides") against the code: the statuses of each machine are the enum of
 * its `status` field in the OpenAPI document, which is generated from the Zod schemas the routers answer with, so a
 * status added to the code without its picture fails here, wherever the enum is declared. Each machine has its
 * transition table in a module, named after it (`export const VPN_CONNECTION_TRANSITIONS = { from: [to, …] }` is the
 * table of `vpn-connection`), and the table's edges are the diagram's edges, both ways (the `[*]` arrows, start and
 * end, are not moves of a status).
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

interface Table {
  file: string;
  name: string;
  edges: [string, string][];
}

/** Every `export const …TRANSITIONS` under server/modules, with its edges (from → to). */
async function transitionTables(): Promise<Table[]> {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith('.ts')) files.push(p);
    }
  };
  walk(join(ROOT, 'server', 'modules'));
  const out: Table[] = [];
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

/** The machine a table names: `VPN_CONNECTION_TRANSITIONS` → `vpn-connection`; null without the suffix. */
function machineOfTable(name: string): string | null {
  const m = /^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)_TRANSITIONS$/.exec(name);
  return m ? m[1]!.toLowerCase().replace(/_/g, '-') : null;
}

/** The name of a machine's table: `vpn-connection` → `VPN_CONNECTION_TRANSITIONS`. */
function tableOfMachine(id: string): string {
  return `${id.toUpperCase().replace(/-/g, '_')}_TRANSITIONS`;
}

/** The edges of a diagram between two states (not the `[*]` start and end arrows). */
function moves(d: Diagram): Set<string> {
  return new Set([...d.edges].filter((e) => !e.includes('[*]')));
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

  it('every transition table names its machine, and every machine has its table', async () => {
    const problems: string[] = [];
    const tables = await transitionTables();
    for (const t of tables) {
      const id = machineOfTable(t.name);
      if (id === null) {
        problems.push(`${t.file}: ${t.name} does not name its machine (<MACHINE>_TRANSITIONS)`);
      } else if (!MACHINES.some((m) => m.id === id)) {
        problems.push(
          `${t.file}: ${t.name} names "${id}", which no diagram is marked with (add it to MACHINES)`,
        );
      }
    }
    for (const m of MACHINES) {
      const found = tables.filter((t) => t.name === tableOfMachine(m.id));
      if (found.length !== 1) {
        problems.push(
          `${m.id}: ${found.length} exports of ${tableOfMachine(m.id)} under server/modules (want exactly one)`,
        );
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });

  for (const m of MACHINES) {
    it(`the table of ${m.id} has exactly the edges ${m.guide} draws`, async () => {
      const table = (await transitionTables()).find((t) => t.name === tableOfMachine(m.id));
      expect(table, `${tableOfMachine(m.id)} under server/modules`).to.not.equal(undefined);
      const drawn = moves(diagramOf(m));
      const allowed = new Set(table!.edges.map(([from, to]) => `${from} --> ${to}`));
      const notDrawn = [...allowed].filter((e) => !drawn.has(e));
      const notAllowed = [...drawn].filter((e) => !allowed.has(e));
      expect(notDrawn, `${table!.file}: ${table!.name} allows these, not drawn in ${m.guide}`).to.deep.equal(
        [],
      );
      expect(
        notAllowed,
        `${m.guide} draws these, which ${table!.file}: ${table!.name} does not allow`,
      ).to.deep.equal([]);
    });
  }

  it('the architecture guide draws the processes, PostgreSQL, Redis, the jobs and the drivers', () => {
    const blocks = fencedBlocks(read('docs/architecture.md'), 'mermaid');
    expect(blocks).to.have.length.greaterThan(0);
    const body = blocks[0]!.body;
    for (const word of ['PostgreSQL', 'Redis', 'Job', 'Drivers', 'process']) expect(body).to.include(word);
  });

  it('names a table after its machine', () => {
    expect(machineOfTable('VPN_CONNECTION_TRANSITIONS')).to.equal('vpn-connection');
    expect(machineOfTable('WEBHOOK_DELIVERY_TRANSITIONS')).to.equal('webhook-delivery');
    expect(machineOfTable('TRANSITIONS')).to.equal(null);
    expect(machineOfTable('deploymentTransitions')).to.equal(null);
    expect(tableOfMachine('webhook-delivery')).to.equal('WEBHOOK_DELIVERY_TRANSITIONS');
    const d = parseDiagram('stateDiagram-v2\n  [*] --> a\n  a --> b\n  b --> b: again\n  b --> [*]');
    expect([...moves(d)]).to.deep.equal(['a --> b', 'b --> b']);
  });

  it('reads a diagram as mermaid does', () => {
    const d = parseDiagram(
      'stateDiagram-v2\n  %% machine: x\n  [*] --> a: start\n  a --> b: go: now\n  b --> a\n  state c\n  b --> [*]',
    );
    expect([...d.states].sort()).to.deep.equal(['a', 'b', 'c']);
    expect([...d.edges]).to.include.members(['a --> b', 'b --> a', '[*] --> a', 'b --> [*]']);
  });
});
