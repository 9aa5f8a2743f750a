// Test tier: process
import { expect } from 'chai';
import { rmSync } from 'node:fs';
import { bubblewrapAvailable } from '../../../server/modules/hosting/build-process.js';
import { createOrg } from '../../support/factories.js';
import { commitFiles, gitRoot, newRepo, startGitServer, type GitServer } from '../../support/git-server.js';
import { http } from '../../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { newDeployment, newSite, waitForDeployment } from './hosting-helpers.js';

/**
 * What a real build prints is hostile (docs/hosting.md, "Build logs"): any byte is stored safely, the log is bounded,
 * and nothing a build prints stops the API or leaves a deployment `building`.
 */

const MAX_LINES = 200;

describe('Hosting: what a real build prints (BUILDER=local)', function () {
  this.timeout(120_000);
  let s: TestServer;
  let gitServer: GitServer;
  let root: string;
  let repoUrl: string;
  let scratch: ScratchDatabase | undefined;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);

  before(async function () {
    if (!bubblewrapAvailable()) {
      console.warn('    bubblewrap (bwrap) is not installed: real builds are not tested');
      this.skip();
    }
    root = gitRoot();
    // No package.json: no install, the build command is the whole build; the output directory is the checkout.
    commitFiles(newRepo(root, 'plain'), { 'index.html': '<!doctype html><p>plain</p>' }, 'plain');
    gitServer = await startGitServer(root);
    repoUrl = gitServer.url('plain');
    // On PostgreSQL, a database of its own: no other test server (simulated builder) may take its build jobs.
    scratch = await ownPostgresDatabase('hosting_build_output');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        BUILDER: 'local',
        PROVISIONING_DELAY_MS: '50',
        BUILD_TIMEOUT: '60s',
        BUILD_LOG_MAX_LINES: String(MAX_LINES),
      },
    });
    process.on('unhandledRejection', onRejection);
  });

  after(async () => {
    process.off('unhandledRejection', onRejection);
    await s?.close();
    await gitServer?.close();
    await scratch?.drop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  beforeEach(() => {
    rejections.length = 0;
  });

  /** Every stored line of a deployment, read through the API. */
  async function allLines(token: string, siteId: string, id: string) {
    const lines: { seq: number; stream: string; message: string }[] = [];
    for (;;) {
      const res = await http(
        s.baseUrl,
        'GET',
        `/v1/hosting/sites/${siteId}/deployments/${id}/logs?after=${lines.at(-1)?.seq ?? 0}&limit=1000`,
        { token },
      );
      expect(res.status, res.text).to.equal(200);
      lines.push(...res.body.logs);
      if (!res.body.has_more) return lines;
    }
  }

  /** Builds `command` on a new site of a new organization; returns the final deployment and its log. */
  async function build(command: string, extra: Record<string, unknown> = {}) {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, {
      git_repo: repoUrl,
      build_command: command,
      output_directory: '.',
      ...extra,
    });
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 90_000);
    return { done, lines: await allLines(owner.token, site.id, d.id), owner, site };
  }

  async function apiAlive(): Promise<void> {
    const res = await http(s.baseUrl, 'GET', '/healthz');
    expect(res.status).to.equal(200);
  }

  describe('any byte is stored safely', () => {
    for (const [title, command] of [
      ['a NUL byte, then the build goes on', 'printf "a\\000b\\n"; sleep 2'],
      ['a NUL byte as the last output', 'printf "a\\000b\\n"'],
    ] as const) {
      it(`${title}: stored as U+FFFD, the build succeeds and the API stays up`, async () => {
        const { done, lines } = await build(command);
        // Unhandled, the failed write of the line ends the API's process.
        expect(rejections).to.deep.equal([]);
        expect(done.status, JSON.stringify(lines)).to.equal('success');
        expect(lines.map((l) => l.message)).to.include('a\uFFFDb');
        await apiAlive();
      });
    }

    it('invalid UTF-8 becomes U+FFFD, and a character split across two chunks of output arrives whole', async () => {
      const { done, lines } = await build(
        // "é" is C3 A9: its first byte alone, a pause (another chunk), the rest; then a lone FF byte.
        'printf "caf\\303"; sleep 0.5; printf "\\251!\\n"; printf "x\\377y\\n"',
      );
      expect(done.status).to.equal('success');
      const messages = lines.map((l) => l.message);
      expect(messages).to.include('café!');
      expect(messages).to.include('x\uFFFDy');
    });

    it('a log write that fails ends the deployment failed with the reason, without ending the API', async () => {
      const repository = s.deps.modules.hosting.repository;
      const original = repository.appendLogLines.bind(repository);
      let target: string | undefined;
      let failures = 0;
      repository.appendLogLines = (tx, deploymentId, lastSeq, output, now) => {
        if (deploymentId === target && output.some((o) => o.message.includes('poison'))) {
          failures += 1;
          return Promise.reject(new Error('the database refused the lines'));
        }
        return original(tx, deploymentId, lastSeq, output, now);
      };
      try {
        const owner = await createOrg(s.deps);
        const site = await newSite(s.baseUrl, owner.token, {
          git_repo: repoUrl,
          build_command: 'echo poison; sleep 3; echo after',
          output_directory: '.',
        });
        const d = await newDeployment(s.baseUrl, owner.token, site.id);
        target = d.id;
        const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 60_000);
        expect(failures).to.be.greaterThan(0);
        expect(done.status).to.equal('failed');
        expect(done.status_message).to.equal('The build log could not be written; the build was stopped');
        const messages = (await allLines(owner.token, site.id, d.id)).map((l) => l.message);
        expect(messages.at(-1)).to.equal('The build log could not be written; the build was stopped');
        expect(messages).not.to.include('after');
        expect(rejections).to.deep.equal([]);
        await apiAlive();
        // The site builds again.
        target = undefined;
        const next = await newDeployment(s.baseUrl, owner.token, site.id);
        expect(
          (await waitForDeployment(s.baseUrl, owner.token, site.id, next.id, undefined, 60_000)).status,
        ).to.equal('success');
      } finally {
        repository.appendLogLines = original;
      }
    });
  });

  describe('the log is bounded', () => {
    it(`keeps at most BUILD_LOG_MAX_LINES lines across the whole deployment, then one line saying it was cut; the build goes on`, async () => {
      // 100 kB of newlines, then the page the deployment serves: written only if the build went on.
      const { done, lines } = await build(
        'rm index.html; head -c 100000 /dev/zero | tr "\\000" "\\n"; echo "<p>after</p>" > index.html',
      );
      expect(done.status, JSON.stringify(lines.slice(-3))).to.equal('success');
      expect(lines).to.have.length(MAX_LINES + 1);
      expect(lines.map((l) => l.seq)).to.deep.equal(Array.from({ length: MAX_LINES + 1 }, (_, i) => i + 1));
      expect(lines.at(-1)!.message).to.equal(
        `The log was cut at ${MAX_LINES} lines (BUILD_LOG_MAX_LINES); later output is not kept, the build goes on`,
      );
      // The lines of the platform before the build command are counted too (the limit is the deployment's).
      expect(lines[0]!.message).to.match(/^Fetching /);
    });

    it('cuts a long line into pieces of 4,096 characters, never splitting a masked value', async () => {
      const secret = 'cut-secret-0123456789';
      const { done, lines } = await build(
        // 4,090 characters, then the value across the 4,096th: masked whole, then cut.
        `printf '%4090s' | tr ' ' x; printf "$CUT_ME"; printf '%5000s\\n' | tr ' ' y`,
        { environment_variables: { CUT_ME: secret } },
      );
      expect(done.status).to.equal('success');
      const start = lines.findIndex((l) => l.message.startsWith('xxxx'));
      const pieces = lines.slice(start, start + 3).map((l) => l.message);
      expect(pieces.map((p) => p.length)).to.deep.equal([4096, 4096, 4090 + 4 + 5000 - 8192]);
      expect(pieces.join('')).to.equal(`${'x'.repeat(4090)}****${'y'.repeat(5000)}`);
      expect(JSON.stringify(lines)).not.to.include(secret);
    });
  });

  describe('builders are shared between organizations', () => {
    const ms = (t: string) => new Date(t).getTime();

    it('runs one build of an organization at a time (BUILD_CONCURRENCY_PER_ORGANIZATION=1), and another organization takes the free builder meanwhile', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const slow = { git_repo: repoUrl, build_command: 'sleep 3', output_directory: '.' };
      const a1 = await newSite(s.baseUrl, a.token, slow);
      const a2 = await newSite(s.baseUrl, a.token, slow);
      const b1 = await newSite(s.baseUrl, b.token, { ...slow, build_command: 'sleep 1' });
      const da1 = await newDeployment(s.baseUrl, a.token, a1.id);
      await waitForDeployment(s.baseUrl, a.token, a1.id, da1.id, ['building', 'success'], 30_000);
      const da2 = await newDeployment(s.baseUrl, a.token, a2.id);
      // The victim deploys last, with two builders in this process (BUILD_CONCURRENCY=2).
      const db1 = await newDeployment(s.baseUrl, b.token, b1.id);
      const [ea1, ea2, eb1] = await Promise.all([
        waitForDeployment(s.baseUrl, a.token, a1.id, da1.id, undefined, 90_000),
        waitForDeployment(s.baseUrl, a.token, a2.id, da2.id, undefined, 90_000),
        waitForDeployment(s.baseUrl, b.token, b1.id, db1.id, undefined, 90_000),
      ]);
      for (const d of [ea1, ea2, eb1]) expect(d.status).to.equal('success');
      // Organization A's builds never overlap: the later one starts after the earlier one ended.
      const [first, second] = [ea1, ea2].sort((x, y) => ms(x.started_at) - ms(y.started_at));
      expect(ms(second!.started_at)).to.be.at.least(ms(first!.completed_at));
      // B's build ran while A's first one was running, not after A's builds.
      expect(ms(eb1.started_at)).to.be.below(ms(first!.completed_at));
      expect(ms(eb1.completed_at)).to.be.below(ms(second!.completed_at));
    });

    it('keeps at most 10 deployments of a site waiting; one more is 409 CONFLICT and creates nothing', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, {
        git_repo: repoUrl,
        build_command: 'sleep 20',
        output_directory: '.',
      });
      const ids: string[] = [];
      ids.push((await newDeployment(s.baseUrl, owner.token, site.id)).id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, ids[0]!, ['building'], 30_000);
      // The first one builds; ten more wait.
      for (let i = 0; i < 10; i += 1) ids.push((await newDeployment(s.baseUrl, owner.token, site.id)).id);
      const list = async () =>
        (
          await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments?limit=100`, {
            token: owner.token,
          })
        ).body.deployments as { id: string; status: string }[];
      const refused = await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deploy`, {
        token: owner.token,
        body: {},
      });
      expect(refused.status, refused.text).to.equal(409);
      expect(refused.body.error.code).to.equal('CONFLICT');
      expect(refused.body.error.details).to.deep.equal([
        { resource: 'queued_deployments', limit: 10, current: 10 },
      ]);
      expect(await list()).to.have.length(11);
      // A canceled one frees its place.
      const cancel = await http(
        s.baseUrl,
        'POST',
        `/v1/hosting/sites/${site.id}/deployments/${ids[5]}/cancel`,
        { token: owner.token },
      );
      expect(cancel.status, cancel.text).to.equal(200);
      ids.push((await newDeployment(s.baseUrl, owner.token, site.id)).id);
      for (const id of ids) {
        await http(s.baseUrl, 'POST', `/v1/hosting/sites/${site.id}/deployments/${id}/cancel`, {
          token: owner.token,
        });
      }
    });
  });
});

describe('Hosting: builders shared between organizations that may run several builds each', function () {
  this.timeout(120_000);
  let s: TestServer;
  let gitServer: GitServer;
  let root: string;
  let repoUrl: string;
  let scratch: ScratchDatabase | undefined;

  before(async function () {
    if (!bubblewrapAvailable()) this.skip();
    root = gitRoot();
    commitFiles(newRepo(root, 'plain'), { 'index.html': '<!doctype html><p>plain</p>' }, 'plain');
    gitServer = await startGitServer(root);
    repoUrl = gitServer.url('plain');
    scratch = await ownPostgresDatabase('hosting_build_share');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        BUILDER: 'local',
        PROVISIONING_DELAY_MS: '50',
        BUILD_TIMEOUT: '60s',
        BUILD_CONCURRENCY: '2',
        BUILD_CONCURRENCY_PER_ORGANIZATION: '3',
      },
    });
  });

  after(async () => {
    await s?.close();
    await gitServer?.close();
    await scratch?.drop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('gives a builder that frees up to a waiting organization with no build running, before another build of an organization that has one', async () => {
    const ms = (t: string) => new Date(t).getTime();
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const site = (token: string, command: string) =>
      newSite(s.baseUrl, token, { git_repo: repoUrl, build_command: command, output_directory: '.' });
    const a1 = await site(a.token, 'sleep 2');
    const a2 = await site(a.token, 'sleep 8');
    const a3 = await site(a.token, 'sleep 1');
    const b1 = await site(b.token, 'sleep 1');
    // One start at a time: both builders are A's.
    const da1 = await newDeployment(s.baseUrl, a.token, a1.id);
    await waitForDeployment(s.baseUrl, a.token, a1.id, da1.id, ['building', 'success'], 30_000);
    const da2 = await newDeployment(s.baseUrl, a.token, a2.id);
    await waitForDeployment(s.baseUrl, a.token, a2.id, da2.id, ['building', 'success'], 30_000);
    // Both builders are A's; A's third build waits first, then B's.
    const da3 = await newDeployment(s.baseUrl, a.token, a3.id);
    const db1 = await newDeployment(s.baseUrl, b.token, b1.id);
    const [ea1, ea2, ea3, eb1] = await Promise.all([
      waitForDeployment(s.baseUrl, a.token, a1.id, da1.id, undefined, 90_000),
      waitForDeployment(s.baseUrl, a.token, a2.id, da2.id, undefined, 90_000),
      waitForDeployment(s.baseUrl, a.token, a3.id, da3.id, undefined, 90_000),
      waitForDeployment(s.baseUrl, b.token, b1.id, db1.id, undefined, 90_000),
    ]);
    for (const d of [ea1, ea2, ea3, eb1]) expect(d.status, d.status_message).to.equal('success');
    // The builder A's first build left went to B, though A's third build had waited longer.
    expect(ms(eb1.started_at)).to.be.at.least(ms(ea1.completed_at));
    expect(ms(eb1.started_at)).to.be.below(ms(ea3.started_at));
  });
});
