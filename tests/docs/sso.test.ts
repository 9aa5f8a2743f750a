// Test tier: unit
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { modules } from '../../server/modules.js';
import { curlCommands, curlRequest, section, shellWords } from './curl.js';
import { fencedBlocks, read } from './markdown.js';

/**
 * The sign-in flow of docs/sso.md ("Signing in") is a sequence diagram, checked against the code like the state
 * diagrams of the guides (tests/docs/diagrams.test.ts): every `/v1/…` path it names is a route the API serves (an
 * operation of the OpenAPI document, which is generated from the router, or a module's own HTTP route, manifest
 * `httpRoutes`), with its method, and every arrow goes between declared participants.
 */

const GUIDE = 'docs/sso.md';
const MARKER = '%% sequence: sso-sign-in';

interface Message {
  from: string;
  to: string;
  text: string;
}

interface Sequence {
  /** Declared participants: alias → shown name. */
  participants: Map<string, string>;
  messages: Message[];
}

/** The participants and messages of a `sequenceDiagram` block, as mermaid reads them. */
export function parseSequence(body: string): Sequence {
  const participants = new Map<string, string>();
  const messages: Message[] = [];
  for (const raw of body.split('\n')) {
    const line = raw.trim();
    const p = /^(?:participant|actor)\s+(\S+)(?:\s+as\s+(.+))?$/.exec(line);
    if (p) {
      participants.set(p[1]!, (p[2] ?? p[1]!).trim());
      continue;
    }
    const m = /^([^\s:+-]+)\s*(?:-->>|->>|-->|->|--x|-x|--\)|-\))\s*[+-]?([^\s:]+)\s*:\s*(.*)$/.exec(line);
    if (m) messages.push({ from: m[1]!, to: m[2]!, text: m[3]!.trim() });
  }
  return { participants, messages };
}

/** The `METHOD /v1/…` calls a message names (the path up to its query or the next space). */
export function callsOf(text: string): { method: string; path: string }[] {
  return [...text.matchAll(/\b(GET|POST|PUT|PATCH|DELETE)\s+(\/v1\/[^\s?{]*(?:\{[a-z_]+\}[^\s?{]*)*)/g)].map(
    (m) => ({ method: m[1]!, path: m[2]!.replace(/\/$/, '') }),
  );
}

/** Every route the API serves under `/v1`, as `METHOD /v1/path/{param}`. */
function servedRoutes(): Set<string> {
  const served = new Set<string>();
  const doc = buildOpenApiDocument();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of Object.keys(item ?? {})) {
      if (/^(get|post|put|patch|delete)$/.test(method)) served.add(`${method.toUpperCase()} /v1${path}`);
    }
  }
  for (const route of modules.flatMap((m) => m.httpRoutes ?? [])) {
    served.add(`${route.method} ${route.prefix ?? '/v1'}${route.path.replace(/:([a-z_]+)/g, '{$1}')}`);
  }
  return served;
}

function sequence(): Sequence {
  const blocks = fencedBlocks(read(GUIDE), 'mermaid').filter((b) => b.body.includes(MARKER));
  expect(blocks, `${GUIDE} has one diagram marked "${MARKER}"`).to.have.length(1);
  expect(blocks[0]!.body.trim().split('\n')[0]!.trim()).to.equal('sequenceDiagram');
  return parseSequence(blocks[0]!.body);
}

describe('docs/sso.md: the sign-in sequence', () => {
  it('names only routes the API serves, with their methods', () => {
    const served = servedRoutes();
    const calls = sequence().messages.flatMap((m) => callsOf(m.text));
    expect(calls.map((c) => `${c.method} ${c.path}`)).to.include.members([
      'POST /v1/auth/sso/start',
      'GET /v1/auth/sso/oidc/callback',
      'POST /v1/auth/sso/saml/acs',
      'POST /v1/auth/sso/token',
    ]);
    const unknown = calls.map((c) => `${c.method} ${c.path}`).filter((c) => !served.has(c));
    expect(unknown, `calls drawn in ${GUIDE} that the API does not serve`).to.deep.equal([]);
  });

  it('draws every arrow between declared, named participants, the API and the IdP among them', () => {
    const { participants, messages } = sequence();
    const names = [...participants.values()].join(' | ');
    expect(names).to.match(/API/);
    expect(names).to.match(/Identity provider|IdP/);
    const undeclared = messages.flatMap((m) => [m.from, m.to]).filter((a) => !participants.has(a));
    expect(undeclared, 'arrows from or to a participant not declared').to.deep.equal([]);
    const silent = [...participants.keys()].filter((a) => !messages.some((m) => m.from === a || m.to === a));
    expect(silent, 'participants without an arrow').to.deep.equal([]);
    expect(
      messages.every((m) => m.text !== ''),
      'every arrow is labelled',
    ).to.equal(true);
  });

  it('reads the curl commands of a section as a shell does (tests/docs/sso-walkthrough.test.ts sends them)', () => {
    const text = [
      '# Guide',
      '## Steps',
      '```sh',
      `curl -s -X PUT $BASE/things -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \\`,
      `  -d '{"name":"a $b # c"}'   # a comment`,
      'echo not curl',
      '```',
      '## Other',
      '```sh',
      'curl -s $BASE/other',
      '```',
    ].join('\n');
    const commands = curlCommands(section(text, 'Steps'));
    expect(commands.map((c) => c.line)).to.deep.equal([4]);
    expect(curlRequest(commands[0]!, { BASE: 'http://x/v1', TOKEN: 't' })).to.deep.equal({
      line: 4,
      method: 'PUT',
      url: 'http://x/v1/things',
      headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
      body: '{"name":"a $b # c"}',
    });
    expect(shellWords('curl $BASE/x', { BASE: 'b' })).to.deep.equal(['curl', 'b/x']);
    expect(() => shellWords('curl $NOPE/x', {})).to.throw(/unknown variable/);
    expect(() => curlRequest({ line: 1, text: 'curl --data-binary @- x' }, {})).to.throw(/not read/);
  });

  it('reads a sequence diagram and its calls as mermaid does', () => {
    const s = parseSequence(
      [
        'sequenceDiagram',
        '  participant C as CLI or app',
        '  actor U',
        '  C->>API: POST /v1/auth/sso/start {email}',
        '  API-->>+C: 302 return_to?code=…',
      ].join('\n'),
    );
    expect([...s.participants]).to.deep.equal([
      ['C', 'CLI or app'],
      ['U', 'U'],
    ]);
    expect(s.messages).to.deep.equal([
      { from: 'C', to: 'API', text: 'POST /v1/auth/sso/start {email}' },
      { from: 'API', to: 'C', text: '302 return_to?code=…' },
    ]);
    expect(callsOf('GET /v1/auth/sso/oidc/callback?code&state')).to.deep.equal([
      { method: 'GET', path: '/v1/auth/sso/oidc/callback' },
    ]);
    expect(callsOf('GET /v1/auth/sso/saml/metadata/{organization_id} then POST /v1/x/')).to.deep.equal([
      { method: 'GET', path: '/v1/auth/sso/saml/metadata/{organization_id}' },
      { method: 'POST', path: '/v1/x' },
    ]);
  });
});
