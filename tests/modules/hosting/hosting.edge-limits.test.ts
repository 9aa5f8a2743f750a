// Test tier: server
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import nodeHttp from 'node:http';
import { join } from 'node:path';
// Node's performance, not the DOM's: the type declarations of @xmldom/xmldom bring the DOM library into the program.
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { ArtifactError, DirectoryArtifactStore } from '../../../server/modules/hosting/artifact-store.js';
import { edgePort } from '../../../server/modules/hosting/hosting.module.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { newSite } from './hosting-helpers.js';
import { edgeRequest, serveFiles } from './edge-helpers.js';

/**
 * The edge and the artifact store under hostile sites and requests (docs/hosting.md, "Artifacts", "The edge"):
 * redirects that cannot leave the site, storing that never blocks the event loop, 404 pages streamed, bounded
 * manifests.
 */

/** Files of one artifact at most (docs/hosting.md, "Artifacts"). */
const FILE_LIMIT = 20_000;

/** Text that compresses like a real page (words, not one repeated byte), of about `bytes`. */
function pageText(bytes: number): string {
  const words = [
    'lorem',
    'ipsum',
    'dolor',
    'sit',
    'amet',
    'edge',
    'site',
    'cloud',
    'deploy',
    'page',
    'build',
  ];
  const parts: string[] = ['<!doctype html><p>'];
  let n = 0;
  let x = 12345;
  while (n < bytes) {
    x = (x * 1103515245 + 12345) % 2147483648;
    const w = `${words[x % words.length]}${x % 97} `;
    parts.push(w);
    n += w.length;
  }
  return parts.join('');
}
describe('Hosting: the edge under hostile requests', function () {
  this.timeout(120_000);
  let s: TestServer;
  let dataDir: string;
  let scratch: ScratchDatabase | undefined;
  let port: number;
  let owner: TestUser;
  let host: string;

  before(async () => {
    dataDir = mkdtempSync(join(process.cwd(), '.data-test-edge-limits-'));
    // On PostgreSQL, a database of its own: nothing else running on the shared one can get in its way.
    scratch = await ownPostgresDatabase('hosting_edge_limits');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        EDGE_PORT: '0',
        DATA_DIR: dataDir,
        ARTIFACTS_DIR: join(dataDir, 'artifacts'),
      },
    });
    port = edgePort(s.deps)!;
    owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, { name: 'Edge Limits' });
    await serveFiles(s.deps, site.id, {
      'index.html': '<p>home</p>',
      'docs/index.html': '<p>docs</p>',
    });
    host = new URL(site.url).host;
  });

  after(async () => {
    await s?.close();
    await scratch?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  describe('the artifact store', () => {
    it('compresses a large page off the event loop (its delay stays small while storing)', async function () {
      const dir = mkdtempSync(join(dataDir, 'big-page-'));
      writeFileSync(join(dir, 'index.html'), pageText(12 * 1024 * 1024));
      const store = new DirectoryArtifactStore(join(dataDir, 'lag-store'), 500_000_000);
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const elu = performance.eventLoopUtilization();
      const started = performance.now();
      const { manifest } = await store.put('dep_lagtest000000000000000', dir);
      const took = performance.now() - started;
      const { active } = performance.eventLoopUtilization(elu);
      delay.disable();
      const maxMs = delay.max / 1e6;
      console.log(
        `      stored 12 MiB in ${Math.round(took)} ms: event loop busy ${Math.round(active)} ms of it, ` +
          `longest delay ${Math.round(maxMs)} ms`,
      );
      // Precompressed as before, but by streams on the thread pool.
      expect(manifest.files['/index.html']!.encodings).to.deep.equal(['br', 'gzip']);
      // Compressing on the event loop blocks it for the whole compression (seconds for this page); on the thread
      // pool, the loop only hashes and moves chunks. A generous bound: on a busy machine a delay can be long for
      // reasons of its own (the process descheduled).
      expect(maxMs, 'longest event loop delay (ms)').to.be.below(2000);
    });

    it('refuses an output over the file limit before storing anything, naming the limit', async () => {
      const dir = mkdtempSync(join(dataDir, 'many-files-'));
      for (let d = 0; d * 1000 <= FILE_LIMIT; d++) {
        mkdirSync(join(dir, `d${d}`));
        for (let i = 0; i < 1000 && d * 1000 + i <= FILE_LIMIT; i++)
          writeFileSync(join(dir, `d${d}`, `f${i}.txt`), '');
      }
      const store = new DirectoryArtifactStore(join(dataDir, 'many-store'), 500_000_000);
      const err = await store.put('dep_manyfiles0000000000000', dir).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(ArtifactError);
      expect((err as Error).message).to.equal(
        'The output has more than 20,000 files, the limit of an artifact',
      );
      expect(await store.manifest('dep_manyfiles0000000000000')).to.equal(null);
      expect(await store.deploymentIds()).to.deep.equal([]);
    });
  });

  describe("the site's 404 page", () => {
    it('is streamed: many concurrent 404s of a large page do not hold the page once each', async () => {
      const size = 16 * 1024 * 1024;
      const owner2 = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner2.token, { name: 'Big 404' });
      // Incompressible-ish content does not matter here: the 404 page is served as stored.
      await serveFiles(s.deps, site.id, { 'index.html': 'home', '404.html': pageText(size) });
      const siteHost = new URL(site.url).host;
      const page = await edgeRequest(port, siteHost, '/missing-once');
      expect(page.status).to.equal(404);
      const pageBytes = page.body.length;
      expect(pageBytes).to.be.greaterThan(size - 100);
      expect(page.headers['content-length']).to.equal(String(pageBytes));

      global.gc?.();
      const before = process.memoryUsage().rss;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
      const clients = 30;
      // Each client takes its answer's head and then reads nothing for a while, as slow clients do.
      const responses = await Promise.all(
        Array.from(
          { length: clients },
          (_, i) =>
            new Promise<nodeHttp.IncomingMessage>((resolve, reject) => {
              const req = nodeHttp.request(
                { host: '127.0.0.1', port, path: `/missing-${i}`, agent: false, headers: { host: siteHost } },
                (res) => {
                  res.pause();
                  resolve(res);
                },
              );
              req.on('error', reject);
              req.end();
            }),
        ),
      );
      await new Promise((r) => setTimeout(r, 1500));
      const lengths = await Promise.all(
        responses.map(
          (res) =>
            new Promise<number>((resolve, reject) => {
              let n = 0;
              res.on('data', (c: Buffer) => (n += c.length));
              res.on('end', () => resolve(n));
              res.on('error', reject);
              res.resume();
            }),
        ),
      );
      clearInterval(sampler);
      expect(responses.map((r) => r.statusCode)).to.deep.equal(Array(clients).fill(404));
      expect(lengths).to.deep.equal(Array(clients).fill(pageBytes));
      const grew = peak - before;
      console.log(
        `      ${clients} concurrent 404s of a ${Math.round(pageBytes / 1048576)} MiB page: RSS grew ${Math.round(grew / 1048576)} MiB`,
      );
      // Read whole per request, they would add the page 30 times (480 MiB).
      expect(grew).to.be.below((clients * pageBytes) / 4);
    });
  });

  describe('unknown hosts', () => {
    /** Counts the edge's lookups of hosts (every one is a query), while `run` runs. */
    async function countLookups(run: () => Promise<void>): Promise<number> {
      const repository = s.deps.modules.hosting.repository;
      const liveRoute = repository.liveRoute.bind(repository);
      const previewRoute = repository.previewRoute.bind(repository);
      let n = 0;
      repository.liveRoute = (...args) => {
        n += 1;
        return liveRoute(...args);
      };
      repository.previewRoute = (...args) => {
        n += 1;
        return previewRoute(...args);
      };
      try {
        await run();
      } finally {
        repository.liveRoute = liveRoute;
        repository.previewRoute = previewRoute;
      }
      return n;
    }

    const sitesDomain = () => s.deps.config.sitesDomain;
    for (const [what, host] of [
      ['a custom domain no site has', () => `unknown-${Date.now()}.example.net`],
      ['an address under SITES_DOMAIN no site has', () => `nothing-${Date.now()}.${sitesDomain()}`],
    ] as const) {
      it(`looks ${what} up once for many requests at once and over the next seconds`, async () => {
        const name = host();
        const lookups = await countLookups(async () => {
          const burst = await Promise.all(Array.from({ length: 50 }, () => edgeRequest(port, name)));
          expect(burst.map((r) => r.status)).to.deep.equal(Array(50).fill(404));
          // Then one every 50 ms for 2.5 s: still within the time an unknown host is remembered (docs/hosting.md).
          for (let i = 0; i < 50; i++) {
            expect((await edgeRequest(port, name, `/x${i}`)).status).to.equal(404);
            await new Promise((r) => setTimeout(r, 50));
          }
        });
        expect(lookups, 'lookups of one unknown host').to.equal(1);
      });
    }

    it('looks up no address and no malformed name at all', async () => {
      const lookups = await countLookups(async () => {
        for (const name of ['127.0.0.1', '[::1]', '10.0.0.1:8080', 'localhost', 'bad_name.example', 'a..b'])
          expect((await edgeRequest(port, name)).status).to.equal(404);
      });
      expect(lookups).to.equal(0);
    });

    it('serves a site at once once it exists in this process, though its address was unknown a moment ago', async () => {
      const owner3 = await createOrg(s.deps);
      const created = await newSite(s.baseUrl, owner3.token, { name: `Later ${Date.now()}` });
      const later = new URL(created.url).host;
      // Unknown until something is live there.
      expect((await edgeRequest(port, later)).status).to.equal(404);
      await serveFiles(s.deps, created.id, { 'index.html': 'now live' });
      const res = await edgeRequest(port, later);
      expect(res.status).to.equal(200);
      expect(res.body.toString()).to.equal('now live');
    });
  });

  describe('redirects', () => {
    it('redirects a directory without its slash to a relative path on the same site', async () => {
      const res = await edgeRequest(port, host, '/docs?x=1');
      expect(res.status).to.equal(301);
      expect(res.headers.location).to.equal('/docs/?x=1');
    });

    // Spellings of one attack: a path the edge normalises to a directory of the site, whose raw form would make a
    // Location that a browser reads as another host (`//evil.example/…`, `/\evil.example/…`).
    const hostile = [
      '/.//evil.example/..%2fdocs',
      '//evil.example/..%2fdocs',
      '/.//evil.example/../docs',
      '/%2F/evil.example/..%2fdocs',
      '/%2f%2fevil.example%2f..%2fdocs',
      '/./%5Cevil.example/..%2fdocs',
      '/%5C%5Cevil.example/..%2fdocs',
      '/\\evil.example/..%2fdocs',
      '/.%2F%2Fevil.example/..%2Fdocs',
      '///evil.example/%2e%2e/docs',
    ];
    for (const path of hostile) {
      it(`answers ${path} with a relative redirect that never starts with // or /\\`, async () => {
        const res = await edgeRequest(port, host, path);
        expect(res.status).to.equal(301);
        const location = String(res.headers.location);
        // One leading slash, not followed by another or by a backslash (which browsers read as a slash).
        expect(location, location).to.match(/^\/(?![/\\])/);
        expect(location, location).to.equal('/docs/');
      });
    }
  });
});
