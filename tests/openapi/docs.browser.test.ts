// Test tier: process
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { sharedServer, type TestServer } from '../support/server.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Hosts the browser itself talks to (sign-in, updates, autofill), whatever the page does. */
const BROWSER_SERVICE_HOST = /(^|\.)(google\.com|googleapis\.com|gstatic\.com|gvt1\.com)$/;

function runChromium(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      CHROMIUM,
      args,
      { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 },
      (err: Error | null, stdout) => (err ? reject(err) : resolve(stdout)),
    );
  });
}

const decodeEntities = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;|&#x27;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/**
 * Opens /docs in headless Chromium and checks that the reference renders every operation from the document,
 * and that the page fetched nothing but this server. Skipped where Chromium is not installed.
 */
describe('GET /docs in a browser', function () {
  this.timeout(180_000);
  let s: TestServer;
  let profile: string;

  before(async function () {
    if (!existsSync(CHROMIUM)) this.skip();
    s = await sharedServer();
    profile = mkdtempSync(join(tmpdir(), 'docs-chromium-'));
  });

  after(() => {
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('renders every operation of the document, offline', async () => {
    const netLog = join(profile, 'net-log.json');
    const dom = await runChromium([
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      `--user-data-dir=${join(profile, 'user-data')}`,
      // Nothing but this machine resolves: a page needing a CDN would fail to render.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
      `--log-net-log=${netLog}`,
      '--virtual-time-budget=30000',
      '--window-size=1400,1000',
      '--dump-dom',
      `${s.baseUrl}/docs/`,
    ]);
    // Scalar breaks long names with <wbr>.
    const text = decodeEntities(dom.replace(/<wbr\s*\/?>/gi, ''));
    const doc = (await (await fetch(`${s.baseUrl}/v1/openapi.json`)).json()) as {
      info: { title: string };
      tags: { name: string }[];
      paths: Record<string, Record<string, { summary: string }>>;
    };
    expect(text).to.include(doc.info.title);
    for (const tag of doc.tags) expect(text, `tag ${tag.name}`).to.include(tag.name);
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        expect(text, `${method.toUpperCase()} ${path}: "${op.summary}"`).to.include(op.summary);
      }
    }

    const requested = [...readFileSync(netLog, 'utf8').matchAll(/"url":"([^"]+)"/g)].map((m) => m[1]!);
    expect(requested).to.include(`${s.baseUrl}/v1/openapi.json`);
    const foreign = requested.filter((u) => {
      if (!/^https?:/.test(u)) return false;
      const { hostname } = new URL(u);
      return hostname !== '127.0.0.1' && !BROWSER_SERVICE_HOST.test(hostname);
    });
    expect(foreign, 'requests that left this machine').to.deep.equal([]);
  });
});
