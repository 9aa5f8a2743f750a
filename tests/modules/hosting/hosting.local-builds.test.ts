// Test tier: process
import { expect } from 'chai';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import nodeHttp from 'node:http';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { bubblewrapAvailable } from '../../../server/modules/hosting/build-process.js';
import type { LocalHostingDriver } from '../../../server/modules/hosting/local-hosting.driver.js';
import { edgePort } from '../../../server/modules/hosting/hosting.module.js';
import { collectOrphanArtifacts } from '../../../server/modules/hosting/builds.service.js';
import { waitRemoved } from '../organization/organization-helpers.js';
import { flushEdgeTraffic } from '../../../server/modules/hosting/edge-traffic.js';
import { edgeRoutesChanged } from '../../../server/modules/hosting/edge.js';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import { createOrg } from '../../support/factories.js';
import {
  commitFiles,
  git,
  gitRoot,
  newRepo,
  startGitServer,
  type GitServer,
} from '../../support/git-server.js';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { logLines, logsOf, newDeployment, newSite, openSse, waitForDeployment } from './hosting-helpers.js';
import { waitFor } from '../../support/wait.js';

/** A build that needs no network: `npm run build` runs a node script writing the site. */
function siteFiles(title: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'package.json': JSON.stringify({ name: 'site', version: '1.0.0', scripts: { build: 'node build.js' } }),
    'build.js': `
const fs = require('fs');
fs.mkdirSync('build/assets', { recursive: true });
fs.mkdirSync('build/docs', { recursive: true });
console.log('building ${title}');
console.error('a warning on stderr');
console.log('token is ' + (process.env.API_TOKEN || 'unset'));
fs.writeFileSync('build/index.html', '<!doctype html><title>${title}</title>' + ' '.repeat(2000) + '<p>${title}</p>');
fs.writeFileSync('build/assets/app.0123abcd.js', 'console.log(1)');
fs.writeFileSync('build/docs/index.html', 'docs');
fs.writeFileSync('build/404.html', 'custom not found');
`,
    ...extra,
  };
}

const edgeGet = (
  port: number,
  host: string,
  path = '/',
  opts: { method?: string; headers?: Record<string, string> } = {},
) =>
  new Promise<{ status: number; headers: nodeHttp.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const req = nodeHttp.request(
      { host: '127.0.0.1', port, path, method: opts.method ?? 'GET', headers: { host, ...opts.headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      },
    );
    req.on('error', reject);
    req.end();
  });

describe('Hosting: real builds (BUILDER=local) and the edge', function () {
  this.timeout(120_000);
  let s: TestServer;
  let gitServer: GitServer;
  let root: string;
  let dataDir: string;
  let artifactsDir: string;
  let port: number;
  let repoUrl: string;
  let v1: string;
  let v2: string;
  let scratch: ScratchDatabase | undefined;
  const domain = () => s.deps.config.sitesDomain;

  before(async function () {
    if (!bubblewrapAvailable()) {
      // .ci/run installs it; elsewhere, say why these tests do not run.
      console.warn('    bubblewrap (bwrap) is not installed: real builds are not tested');
      this.skip();
    }
    root = gitRoot();
    const repo = newRepo(root, 'web');
    v1 = commitFiles(repo, siteFiles('version one'), 'v1');
    git(repo, 'checkout', '-q', '-b', 'feature');
    commitFiles(repo, siteFiles('feature branch'), 'feature');
    git(repo, 'checkout', '-q', 'main');
    v2 = commitFiles(repo, siteFiles('version two'), 'v2');
    gitServer = await startGitServer(root);
    repoUrl = gitServer.url('web');
    // Where DATA_DIR is by default (./data), not under /tmp: the sandbox's private /tmp would hide it anyway.
    dataDir = mkdtempSync(join(process.cwd(), '.data-test-hosting-'));
    artifactsDir = join(dataDir, 'artifacts');
    // A secret file of the API, as the generated JWT secret is kept (mode 0600).
    writeFileSync(join(dataDir, 'jwt-secret'), 'data-dir-secret-value-0123456789\n', { mode: 0o600 });
    // And one any local user could read, in a data directory open to all: only the sandbox keeps the build from
    // them (file permissions alone would stop a build running as nobody, and prove nothing about the sandbox).
    writeFileSync(join(dataDir, 'readable-secret'), 'readable-secret-value-0123456789\n', { mode: 0o644 });
    // On PostgreSQL, a database of its own: no other test server (with the simulated builder) may take its build jobs.
    scratch = await ownPostgresDatabase('hosting_local_builds');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        BUILDER: 'local',
        EDGE_PORT: '0',
        DATA_DIR: dataDir,
        ARTIFACTS_DIR: artifactsDir,
        PROVISIONING_DELAY_MS: '50',
        BUILD_TIMEOUT: '20s',
      },
    });
    // Opened after the start (which may close it to its owner): see the secret files above.
    chmodSync(dataDir, 0o755);
    port = edgePort(s.deps)!;
    expect(port).to.be.a('number');
  });

  after(async () => {
    await s?.close();
    await gitServer?.close();
    await scratch?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('builds the branch head, streams the real log live, and serves the site by Host (live, preview, custom domain)', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, {
      git_repo: repoUrl,
      domain: `www.site-${Date.now()}.example.org`,
      environment_variables: { API_TOKEN: 'tok-secret-4242' },
    });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    expect(d.builder).to.equal('local');
    const sse = await openSse(s.baseUrl, `/v1/hosting/sites/${site.id}/deployments/${d.id}/logs`, {
      token: owner.token,
    });
    await sse.ended;
    const end = sse.events.at(-1)!;
    expect(end.event).to.equal('end');
    expect(JSON.parse(end.data)).to.deep.equal({ status: 'success' });
    const lines = logLines(sse.events);
    const messages = lines.map((l: { message: string }) => l.message);
    expect(messages).to.include('building version two');
    const warning = (lines as unknown as { stream: string; message: string }[]).find(
      (l) => l.message === 'a warning on stderr',
    );
    expect(warning?.stream).to.equal('stderr');
    // The variable reached the build, named in the log; its value never reaches the log.
    expect(messages).to.include('Injecting 1 environment variable: API_TOKEN');
    expect(messages).to.include('token is ****');
    expect(JSON.stringify(lines)).not.to.include('tok-secret-4242');
    expect((await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs).to.deep.equal(lines);

    const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000);
    expect(done.status).to.equal('success');
    expect(done.commit).to.equal(v2);
    expect(done.live).to.equal(true);

    const live = await edgeGet(port, `${site.url.replace('https://', '')}`);
    expect(live.status).to.equal(200);
    expect(live.body.toString()).to.include('version two');
    expect(live.headers['content-type']).to.equal('text/html; charset=utf-8');
    const preview = await edgeGet(port, new URL(done.url).host);
    expect(preview.status).to.equal(200);
    expect(preview.body.toString()).to.include('version two');
    // A pending custom domain is not served; verified (as a found TXT record makes it), it is, at once.
    expect((await edgeGet(port, site.domain)).status).to.equal(404);
    await s.deps.db.orm.em
      .fork()
      .nativeUpdate(HostingSite, { id: site.id }, { domainVerifiedAt: new Date() });
    edgeRoutesChanged(s.deps);
    const custom = await edgeGet(port, site.domain);
    expect(custom.body.toString()).to.include('version two');
    expect((await edgeGet(port, `nothing-here.${domain()}`)).status).to.equal(404);
    expect((await edgeGet(port, 'unknown.example.net')).status).to.equal(404);

    await flushEdgeTraffic(s.deps);
    const detail = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
    expect(detail.body.site.metrics.requests_24h).to.equal(3);
  });

  it('serves with HTTP semantics: ETag and 304, HEAD, ranges, compression, caching, directories, 404.html, no escape', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, { git_repo: repoUrl });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    expect(
      (await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000)).status,
    ).to.equal('success');
    const host = new URL(site.url).host;

    const page = await edgeGet(port, host, '/');
    const etag = page.headers.etag!;
    expect(etag).to.match(/^"[0-9a-f]{32}"$/);
    expect(page.headers['cache-control']).to.equal('public, max-age=0, must-revalidate');
    const revalidated = await edgeGet(port, host, '/', { headers: { 'if-none-match': etag } });
    expect(revalidated.status).to.equal(304);
    expect(revalidated.body.length).to.equal(0);
    expect(revalidated.headers).to.include({ etag, 'cache-control': 'public, max-age=0, must-revalidate' });
    expect(revalidated.headers).to.not.have.any.keys('content-type', 'content-encoding', 'content-length');
    for (const [headers, status] of [
      [{ 'if-none-match': `"0123", ${etag}` }, 304],
      [{ 'if-none-match': '*' }, 304],
      [{ 'if-none-match': '"0123456789abcdef0123456789abcdef"' }, 200],
      [{ 'if-none-match': etag, 'cache-control': 'no-cache' }, 200],
      [{ 'if-none-match': etag, 'accept-encoding': 'gzip' }, 200],
      [{ 'if-none-match': `"${etag.slice(1, -1)}-gzip"`, 'accept-encoding': 'gzip' }, 304],
    ] as const) {
      expect((await edgeGet(port, host, '/', { headers })).status, JSON.stringify(headers)).to.equal(status);
    }
    const head = await edgeGet(port, host, '/index.html', { method: 'HEAD' });
    expect(head.status).to.equal(200);
    expect(head.body.length).to.equal(0);
    expect(Number(head.headers['content-length'])).to.equal(page.body.length);
    const range = await edgeGet(port, host, '/', { headers: { range: 'bytes=0-14' } });
    expect(range.status).to.equal(206);
    expect(range.body.toString()).to.equal('<!doctype html>');
    const gz = await edgeGet(port, host, '/', { headers: { 'accept-encoding': 'gzip' } });
    expect(gz.headers['content-encoding']).to.equal('gzip');
    expect(gz.headers.vary).to.equal('Accept-Encoding');
    expect(gunzipSync(gz.body).toString()).to.equal(page.body.toString());
    const asset = await edgeGet(port, host, '/assets/app.0123abcd.js');
    expect(asset.headers['content-type']).to.equal('text/javascript; charset=utf-8');
    expect(asset.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
    const dir = await edgeGet(port, host, '/docs');
    expect(dir.status).to.equal(301);
    expect(dir.headers.location).to.equal('/docs/');
    expect((await edgeGet(port, host, '/docs/')).body.toString()).to.equal('docs');
    const missing = await edgeGet(port, host, '/no/such/page');
    expect(missing.status).to.equal(404);
    expect(missing.body.toString()).to.equal('custom not found');
    for (const path of [
      '/../../../../etc/passwd',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/..%2f..%2fpackage.json',
      '/build.js',
    ]) {
      const r = await edgeGet(port, host, path);
      expect(r.status, path).to.equal(404);
      expect(r.body.toString(), path).to.equal('custom not found');
    }
    expect((await edgeGet(port, host, '/', { method: 'POST' })).status).to.equal(405);
  });

  it('builds a given commit, switches live at once on a new deployment and on rollback, and stops serving a deleted site', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, { git_repo: repoUrl });
    const host = new URL(site.url).host;
    const first = await newDeployment(s.baseUrl, owner.token, site.id);
    expect(
      (await waitForDeployment(s.baseUrl, owner.token, site.id, first.id, undefined, 90_000)).status,
    ).to.equal('success');
    expect((await edgeGet(port, host)).body.toString()).to.include('version two');

    const pinned = await newDeployment(s.baseUrl, owner.token, site.id, { commit: v1.slice(0, 10) });
    const second = await waitForDeployment(s.baseUrl, owner.token, site.id, pinned.id, undefined, 90_000);
    expect(second.status, second.status_message).to.equal('success');
    expect(second.commit).to.equal(v1);
    expect((await edgeGet(port, host)).body.toString()).to.include('version one');

    const feature = await newDeployment(s.baseUrl, owner.token, site.id, { branch: 'feature' });
    expect(
      (await waitForDeployment(s.baseUrl, owner.token, site.id, feature.id, undefined, 90_000)).status,
    ).to.equal('success');
    expect((await edgeGet(port, host)).body.toString()).to.include('feature branch');

    const rollback = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/rollback`, {
      token: owner.token,
      body: { deployment_id: first.id },
    });
    expect(rollback.status, rollback.text).to.equal(200);
    expect((await edgeGet(port, host)).body.toString()).to.include('version two');
    // The preview of the rolled-back-from deployment still answers.
    const done = await waitForDeployment(s.baseUrl, owner.token, site.id, pinned.id, undefined, 90_000);
    expect((await edgeGet(port, new URL(done.url).host)).body.toString()).to.include('version one');

    expect(
      (await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: owner.token })).status,
    ).to.equal(200);
    expect((await edgeGet(port, host)).status).to.equal(404);
    expect((await edgeGet(port, new URL(done.url).host)).status).to.equal(404);
    // Its artifacts left the store (the contents no other artifact uses follow: hosting.services.unit.test.ts).
    for (const id of [first.id, pinned.id, feature.id]) {
      expect(existsSync(join(artifactsDir, 'manifests', `${id}.json`)), id).to.equal(false);
    }
  });

  it('removes the artifacts of a deleted organization’s sites (the collection job), and no one else’s', async () => {
    const kept = await createOrg(s.deps);
    const keptSite = await newSite(s.baseUrl, kept.token, { git_repo: repoUrl });
    const keptDeployment = await newDeployment(s.baseUrl, kept.token, keptSite.id);
    const owner = await createOrg(s.deps, { name: 'Leaving Inc' });
    const site = await newSite(s.baseUrl, owner.token, { git_repo: repoUrl });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    for (const [token, siteId, id] of [
      [kept.token, keptSite.id, keptDeployment.id],
      [owner.token, site.id, d.id],
    ] as const) {
      expect((await waitForDeployment(s.baseUrl, token, siteId, id, undefined, 90_000)).status).to.equal(
        'success',
      );
    }
    const manifest = (id: string) => join(artifactsDir, 'manifests', `${id}.json`);
    expect(existsSync(manifest(d.id))).to.equal(true);

    const del = await http(s.baseUrl, 'DELETE', '/v1/organization', {
      token: owner.token,
      body: { confirm: 'Leaving Inc', password: owner.password },
    });
    expect(del.status, del.text).to.equal(202);
    await waitRemoved(s.deps, owner.organizationId);
    // The organization's rows went; its artifact goes with the next collection (every 15 minutes).
    expect(existsSync(manifest(d.id))).to.equal(true);
    expect(await collectOrphanArtifacts(s.deps)).to.deep.include({ removed: 1 });
    expect(existsSync(manifest(d.id))).to.equal(false);
    expect(existsSync(manifest(keptDeployment.id))).to.equal(true);
    expect((await edgeGet(port, new URL(keptSite.url).host)).status).to.equal(200);
    expect(await collectOrphanArtifacts(s.deps)).to.deep.equal({ removed: 0, contents: 0 });
  });

  it('fails a build with the reason: exit status, missing output directory, no index.html, unknown commit', async () => {
    const owner = await createOrg(s.deps);
    const cases: [Record<string, unknown>, Record<string, unknown>, RegExp][] = [
      [{ build_command: 'node -e "process.exit(3)"' }, {}, /The build command exited with status 3/],
      [{ output_directory: 'dist' }, {}, /output directory dist does not exist/],
      [{ build_command: 'mkdir -p build && echo x > build/other.html' }, {}, /has no index\.html/],
      // A link out of the checkout is not followed.
      [{ build_command: 'ln -s /etc build' }, {}, /output directory build does not exist/],
      [{}, { commit: 'abcdef1234567' }, /was not found on branch main/],
    ];
    for (const [settings, body, reason] of cases) {
      const site = await newSite(s.baseUrl, owner.token, { git_repo: repoUrl, ...settings });
      const d = await newDeployment(s.baseUrl, owner.token, site.id, body);
      const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000);
      expect(done.status, JSON.stringify(settings)).to.equal('failed');
      expect(done.status_message).to.match(reason);
      const logs = await logsOf(s.baseUrl, owner.token, site.id, d.id);
      expect(logs.logs.at(-1).message).to.match(reason);
    }
  });

  it('cancel kills the whole build at once', async () => {
    const owner = await createOrg(s.deps);
    const marker = `sleepy-${Date.now()}`;
    const site = await newSite(s.baseUrl, owner.token, {
      git_repo: repoUrl,
      build_command: `echo started; sh -c 'node -e "setTimeout(()=>{},60000)" ${marker}' & node -e "setTimeout(()=>{},60000)" ${marker}`,
    });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    await waitFor(
      'the build to log "started"',
      async () => {
        const logs = await logsOf(s.baseUrl, owner.token, site.id, d.id);
        return logs.logs.some((l: { message: string }) => l.message === 'started');
      },
      { timeoutMs: 30_000 },
    );
    const running = () =>
      readdirSync('/proc').filter((p) => {
        if (!/^\d+$/.test(p)) return false;
        try {
          return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
        } catch {
          return false;
        }
      });
    await waitFor('both build processes to run', () => running().length >= 2);
    const cancel = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${d.id}/cancel`, {
      token: owner.token,
    });
    expect(cancel.status, cancel.text).to.equal(200);
    expect(cancel.body.deployment.status).to.equal('canceled');
    await waitFor('no build process left', () => running().length === 0, { timeoutMs: 5_000 });
  });

  it('a build cannot read the API secrets, its environment, other sites or their artifacts; its time is limited', async () => {
    const owner = await createOrg(s.deps);
    // Another organization's site, built first: its artifact is in the store.
    const other = await createOrg(s.deps);
    const otherSite = await newSite(s.baseUrl, other.token, { git_repo: repoUrl });
    const od = await newDeployment(s.baseUrl, other.token, otherSite.id);
    expect(
      (await waitForDeployment(s.baseUrl, other.token, otherSite.id, od.id, undefined, 90_000)).status,
    ).to.equal('success');
    const manifest = join(artifactsDir, 'manifests', `${od.id}.json`);
    expect(readFileSync(manifest, 'utf8')).to.include('index.html');
    const jwtSecret = s.deps.config.jwtSecret!;
    const hostProbe = join(process.cwd(), `probe-${Date.now()}`);
    // Each attempt prints LEAK and the build fails when any of them succeeds.
    const probe = [
      // Both secret files of the data directory (the glob matches nothing where the directory is hidden).
      `if cat ${dataDir}/*secret* 2>/dev/null | grep -q .; then echo LEAK data-dir; exit 1; fi`,
      `if cat ${manifest} 2>/dev/null; then echo LEAK artifacts; exit 1; fi`,
      `if ls ${artifactsDir}/objects 2>/dev/null | grep -q .; then echo LEAK objects; exit 1; fi`,
      `if cat /proc/${process.pid}/environ 2>/dev/null | grep -q JWT; then echo LEAK environ; exit 1; fi`,
      `if env | grep -q -e JWT_SECRET -e DATABASE_URL -e ${jwtSecret.slice(0, 12)}; then echo LEAK env; exit 1; fi`,
      // Only its own directory is there (a second one would be another build's).
      `if [ $(ls /tmp/cloud-platform-builds | wc -l) -gt 1 ]; then echo LEAK other-builds; exit 1; fi`,
      `if [ -S /run/postgresql/.s.PGSQL.5432 ]; then echo LEAK database-socket; exit 1; fi`,
      `if touch /etc/probe 2>/dev/null; then echo LEAK write; exit 1; fi`,
      // The checkout: where it lies under /tmp the sandbox's private /tmp may hold an empty copy of its path (the
      // parents of the hidden directories), so the write may succeed there; it must never reach the real one.
      `touch ${hostProbe} 2>/dev/null || true`,
      `if [ "$(id -u)" = 0 ]; then echo LEAK root; exit 1; fi`,
      'echo probes done',
    ].join('\n');
    // The probes name paths of this checkout and of temporary directories, as long as they happen to be: they run
    // from a script of the repository rather than from a build command of at most 1,000 characters.
    commitFiles(newRepo(root, 'probes'), { ...siteFiles('probes'), 'probe.sh': `${probe}\n` }, 'probes');
    const site = await newSite(s.baseUrl, owner.token, {
      git_repo: gitServer.url('probes'),
      build_command: 'sh probe.sh && npm run build',
    });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000);
    const logs = (await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs as { message: string }[];
    const text = logs.map((l) => l.message).join('\n');
    // (The command itself is in the log: only a line the probes print starts with LEAK.)
    expect(logs.filter((l) => l.message.startsWith('LEAK')).map((l) => l.message)).to.deep.equal([]);
    expect(done.status, text).to.equal('success');
    expect(text).to.include('probes done');
    expect(text).not.to.include(jwtSecret);
    expect(text).not.to.include('data-dir-secret-value');
    expect(text).not.to.include('readable-secret-value');
    expect(existsSync(hostProbe), 'a build wrote into the checkout').to.equal(false);
  });

  it('a build over BUILD_TIMEOUT is killed and fails saying so', async () => {
    const owner = await createOrg(s.deps);
    const driver = s.deps.modules.hosting.driver as LocalHostingDriver;
    const original = { ...driver.options };
    driver.options.timeoutMs = 1500;
    try {
      const site = await newSite(s.baseUrl, owner.token, {
        git_repo: repoUrl,
        build_command: 'echo slow; node -e "setTimeout(()=>{},60000)"',
      });
      const d = await newDeployment(s.baseUrl, owner.token, site.id);
      const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000);
      expect(done.status).to.equal('failed');
      expect(done.status_message).to.match(/took longer than the build time limit \(BUILD_TIMEOUT, 2 s\)/);
    } finally {
      driver.options.timeoutMs = original.timeoutMs;
    }
  });
});
