// Test tier: process
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { build } from 'esbuild';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createOrg, type TestUser } from '../support/factories.js';
import { startTestServer, type TestServer } from '../support/server.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The SDK (client-sdk/src/index.ts) and the app's scenarios, bundled for the browser as an app would. */
async function bundleSdk(): Promise<string> {
  const out = await build({
    entryPoints: ['tests/client-sdk/browser/app.ts'],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    conditions: ['@cloud-platform/source'],
    write: false,
    logLevel: 'silent',
  });
  return out.outputFiles[0]!.text;
}

/** A static site on loopback: an empty page that loads the bundle (which sets `globalThis.app`). */
async function servePage(sdk: string): Promise<{ server: Server; origin: string }> {
  const html =
    '<!doctype html><meta charset="utf-8"><title>app</title>' +
    '<script type="module">import "/sdk.js"; window.sdkReady = true;</script>';
  const server = createServer((req, res) => {
    if (req.url === '/sdk.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(sdk);
    } else if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/**
 * A browser app on another origin uses the SDK against the API (docs/api-conventions.md, "Browsers (CORS)"): headless Chromium
 * driven by playwright-core loads a page from one loopback port that calls the API on another. Skipped, saying why,
 * where Chromium is missing or cannot start.
 */
describe('the client SDK in a browser, cross-origin (CORS)', function () {
  this.timeout(180_000);
  let api: TestServer | undefined;
  let app: { server: Server; origin: string } | undefined;
  let foreign: { server: Server; origin: string } | undefined;
  let browser: BrowserContext | undefined;
  let profile: string | undefined;
  let owner: TestUser;

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      console.log(`      (skipped: no Chromium at ${CHROMIUM}; apt-get install chromium, as .ci/run does)`);
      this.skip();
    }
    const sdk = await bundleSdk();
    app = await servePage(sdk);
    foreign = await servePage(sdk);
    profile = mkdtempSync(join(tmpdir(), 'sdk-chromium-'));
    try {
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: CHROMIUM_ARGS,
        timeout: 60_000,
      });
    } catch (err) {
      console.log(`      (skipped: Chromium cannot start here: ${String(err).split('\n')[0]})`);
      this.skip();
    }
    api = await startTestServer({ env: { CORS_ORIGINS: app.origin } });
    owner = await createOrg(api.deps);
  });

  after(async () => {
    await browser?.close();
    await api?.close();
    for (const site of [app, foreign]) if (site) await new Promise((r) => site.server.close(r));
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  async function open(origin: string) {
    const page = await browser!.newPage();
    await page.goto(`${origin}/`);
    await page.waitForFunction('globalThis.sdkReady === true');
    return page;
  }

  /** Runs a scenario of tests/client-sdk/browser/app.ts in the page. */
  function run<T>(page: Page, scenario: 'signedIn' | 'refused'): Promise<T> {
    const args = { baseUrl: api!.baseUrl, email: owner.email, password: owner.password };
    return page.evaluate<T>(`globalThis.app.${scenario}(${JSON.stringify(args)})`);
  }

  it('signs in, lists and creates VPN connections (Idempotency-Key), reads X-Request-Id of an error, follows a build log', async () => {
    const page = await open(app!.origin);
    const result = await run<any>(page, 'signedIn');
    expect(result.loggedIn).to.equal(true);
    expect(result.before).to.equal(0);
    expect(result.replayed).to.equal(result.created);
    expect(result.after).to.deep.equal([result.created]);
    expect(result.sdkError).to.deep.include({ name: 'NotFoundError', code: 'NOT_FOUND' });
    expect(result.sdkError.requestId).to.match(/^req_/);
    expect(result.restError).to.deep.include({
      status: 404,
      header: 'page-req-1',
      code: 'NOT_FOUND',
      requestId: 'page-req-1',
    });
    expect(result.restError.rateLimit).to.match(/^"burst";r=\d+;t=\d+$/);
    expect(result.lines.length).to.be.greaterThan(0);
    expect(result.lines).to.deep.equal(result.lines.map((_: number, i: number) => i + 1));
    expect(result.status).to.equal('success');
    await page.close();
  });

  it('refuses a page from an origin outside CORS_ORIGINS: the browser blocks the answer', async () => {
    const page = await open(foreign!.origin);
    expect(await run(page, 'refused')).to.deep.equal({ sdk: 'CONNECTION_ERROR', plain: 'TypeError' });
    await page.close();
  });
});
