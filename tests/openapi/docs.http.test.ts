// Test tier: server
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';

/** `src`/`href` of every script, stylesheet, icon and preload the page asks the browser to load. */
function assetUrls(html: string): string[] {
  const out: string[] = [];
  for (const m of html.matchAll(/<(script|link|img|iframe)\b[^>]*?\b(?:src|href)\s*=\s*["']([^"']+)["']/gi)) {
    out.push(m[2]!);
  }
  return out;
}

describe('GET /v1/openapi.json and /docs', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('serves the OpenAPI document without a token, as JSON, with a request id', async () => {
    const res = await http(s.baseUrl, 'GET', '/v1/openapi.json');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.headers.get('x-request-id')).to.match(/^req_/);
    expect(res.body.openapi).to.equal('3.1.0');
    const expected = JSON.parse(
      JSON.stringify(buildOpenApiDocument({ publicBaseUrl: s.deps.config.publicBaseUrl })),
    );
    expect(res.body).to.deep.equal(expected);
    expect(res.body.servers[0].url).to.equal(`${s.deps.config.publicBaseUrl}/v1`);
  });

  it('serves an HTML reference page that loads /v1/openapi.json', async () => {
    for (const path of ['/docs', '/docs/']) {
      const res = await fetch(`${s.baseUrl}${path}`);
      expect(res.status, path).to.equal(200);
      expect(res.headers.get('content-type'), path).to.match(/^text\/html/);
      const html = await res.text();
      expect(html).to.include('/v1/openapi.json');
      expect(html).to.match(/<title>[^<]*API[^<]*<\/title>/);
    }
  });

  it('loads every asset of the page from this server (nothing from a CDN), each answering 200', async () => {
    const res = await fetch(`${s.baseUrl}/docs/`);
    const html = await res.text();
    const assets = assetUrls(html);
    expect(assets, 'the page loads its script').to.not.be.empty;
    for (const asset of assets) {
      const url = new URL(asset, res.url);
      expect(url.origin, asset).to.equal(s.baseUrl);
      const got = await fetch(url);
      expect(got.status, asset).to.equal(200);
      expect((await got.arrayBuffer()).byteLength, asset).to.be.greaterThan(0);
      if (url.pathname.endsWith('.js')) expect(got.headers.get('cache-control')).to.match(/max-age=\d+/);
    }
    // The configuration turns off what the reference would otherwise fetch from the internet.
    const config = /createApiReference\([^,]+,\s*(\{[\s\S]*?\})\s*\)/.exec(html);
    expect(config, 'the page configures the reference').to.not.equal(null);
    expect(JSON.parse(config![1]!)).to.include({
      url: '/v1/openapi.json',
      withDefaultFonts: false,
      telemetry: false,
    });
  });
});
