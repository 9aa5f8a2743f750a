// Test tier: server
import { expect } from 'chai';
import { listGuides } from '../../server/guides.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { read } from './markdown.js';

/** The reference page links to the guides (README, "Guides"), and the server serves each one under /docs/guides/. */
describe('GET /docs/guides/:file', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('serves every guide the OpenAPI description links to, as Markdown, without a token', async () => {
    const doc = await http(s.baseUrl, 'GET', '/v1/openapi.json');
    const description = (doc.body as { info: { description: string } }).info.description;
    const linked = [...description.matchAll(/\]\(([^)]+\/docs\/guides\/[^)]+)\)/g)].map((m) => m[1]!);
    expect(linked).to.have.length(listGuides().length);
    for (const url of linked) {
      const res = await fetch(new URL(new URL(url).pathname, s.baseUrl));
      expect(res.status, url).to.equal(200);
      expect(res.headers.get('content-type'), url).to.match(/^text\/markdown; charset=utf-8/);
      const file = new URL(url).pathname.split('/').pop()!;
      expect(await res.text(), url).to.equal(read(`docs/${file}`));
    }
  });

  it('answers 404 in the error envelope for anything that is not a guide', async () => {
    for (const path of [
      '/docs/guides/nope.md',
      '/docs/guides/..%2Fpackage.json',
      '/docs/guides/%2e%2e%2fREADME.md',
    ]) {
      const res = await http(s.baseUrl, 'GET', path);
      expect(res.status, path).to.equal(404);
      expect(res.body, path).to.include({ success: false });
    }
  });
});
