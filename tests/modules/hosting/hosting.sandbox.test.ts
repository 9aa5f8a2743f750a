// Test tier: process
import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bubblewrapAvailable, othersCanReach } from '../../../server/modules/hosting/build-process.js';
import type { LocalHostingDriver } from '../../../server/modules/hosting/local-hosting.driver.js';
import { createOrg } from '../../support/factories.js';
import {
  commitFiles,
  git,
  gitRoot,
  newRepo,
  startGitServer,
  type GitServer,
} from '../../support/git-server.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { logsOf, newDeployment, newSite, waitForDeployment } from './hosting-helpers.js';

/**
 * What a hostile build command tries against the sandbox of real builds (docs/hosting.md, "The sandbox"): the
 * host's files outside the allow-list, the service user's own files when the API does not run as root, memory, disk,
 * the deployment's time, and what a crash leaves behind.
 */

const MiB = 1024 * 1024;
/** Small limits, so that going over them is quick. */
const MEMORY_LIMIT = '200MiB';
const DISK_LIMIT_MIB = 48;

/** A site whose `npm run build` writes `build/index.html`; `extra` adds files (scripts of the attacks). */
function siteFiles(
  extra: Record<string, string> = {},
  scripts: Record<string, string> = {},
): Record<string, string> {
  return {
    'package.json': JSON.stringify({
      name: 'site',
      version: '1.0.0',
      scripts: { build: 'node build.js', ...scripts },
    }),
    'build.js': `require('fs').mkdirSync('build', { recursive: true });
require('fs').writeFileSync('build/index.html', '<p>hello</p>');`,
    ...extra,
  };
}

describe('Hosting: the sandbox of real builds (allow-list, user, memory, disk, time, cleanup)', function () {
  this.timeout(180_000);
  let s: TestServer;
  let gitServer: GitServer;
  let root: string;
  let closedParent: string;
  let dataDir: string;
  let scratch: ScratchDatabase | undefined;
  const secret = `host-secret-${randomBytes(8).toString('hex')}`;
  /** Files of the host outside the allow-list, each readable by every local user (mode 0644). */
  const hostFiles: string[] = [];
  const cleanups: string[] = [];
  const buildsRoot = join(tmpdir(), 'cloud-platform-builds');
  const stale: { dir: string; old: string; link: string; target: string } = {
    dir: '',
    old: '',
    link: '',
    target: '',
  };

  /** A repository of its own served by the git server; returns its URL. */
  const repo = (name: string, files: Record<string, string>): string => {
    commitFiles(newRepo(root, name), files, name);
    return gitServer.url(name);
  };

  /** One build by a driver in a child process (sandbox-build-child.ts), as `as.uid` when given. */
  const runChild = async (
    input: {
      repo: string;
      buildsRoot: string;
      artifactsDir: string;
      buildCommand: string;
      hideDirs?: string[];
    },
    as?: { uid: number; home: string },
  ) => {
    const node = [process.execPath, '--import', 'tsx', 'tests/modules/hosting/sandbox-build-child.ts'];
    const [cmd, ...args] = as
      ? ['setpriv', `--reuid=${as.uid}`, `--regid=${as.uid}`, '--clear-groups', ...node]
      : node;
    const child = spawn(cmd!, args, {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH, HOME: as?.home ?? tmpdir(), SANDBOX_CHILD: JSON.stringify(input) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    await new Promise((r) => child.on('close', r));
    const line = stdout.split('\n').find((l) => l.startsWith('{'));
    expect(line, stderr).to.be.a('string');
    return JSON.parse(line!) as { result: { state: string }; lines: string[] };
  };

  /** Deploys a new site of a new organization and waits for the end; returns the deployment and its log. */
  const deploy = async (settings: Record<string, unknown>) => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, settings);
    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    const done = await waitForDeployment(s.baseUrl, owner.token, site.id, d.id, undefined, 120_000);
    const logs = (await logsOf(s.baseUrl, owner.token, site.id, d.id)).logs as { message: string }[];
    return { site, done, text: logs.map((l) => l.message).join('\n') };
  };

  before(async function () {
    if (!bubblewrapAvailable() || process.getuid?.() !== 0) {
      console.warn(
        '    bubblewrap is not installed or the tests do not run as root: the sandbox is not tested',
      );
      this.skip();
    }
    root = gitRoot();
    gitServer = await startGitServer(root);
    // DATA_DIR outside /tmp (which a sandbox may replace by its own), open to every local user: only the sandbox
    // keeps a build from it.
    closedParent = mkdtempSync('/var/tmp/cp-sandbox-');
    dataDir = join(closedParent, 'data');
    mkdirSync(join(dataDir, 'artifacts'), { recursive: true });
    chmodSync(closedParent, 0o755);
    writeFileSync(join(dataDir, 'readable-secret'), `${secret}\n`, { mode: 0o644 });
    // Where the platform's configuration lives, and other places of the host outside the allow-list.
    const tag = randomBytes(4).toString('hex');
    for (const dir of [`/etc/cp-sandbox-${tag}`, `/var/lib/cp-sandbox-${tag}`, `/srv/cp-sandbox-${tag}`]) {
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      cleanups.push(dir);
    }
    const backupDir = `/var/lib/cp-sandbox-${tag}/backups`;
    mkdirSync(backupDir, { mode: 0o755 });
    for (const file of [
      `/etc/cp-sandbox-${tag}/env`,
      `/var/lib/cp-sandbox-${tag}/database-hosts`,
      `${backupDir}/tenant.dump`,
      `/srv/cp-sandbox-${tag}/notes`,
      join(process.cwd(), `.sandbox-config-${tag}`),
    ]) {
      writeFileSync(file, `JWT_SECRET=${secret}\n`, { mode: 0o644 });
      chmodSync(file, 0o644);
      hostFiles.push(file);
    }
    cleanups.push(join(process.cwd(), `.sandbox-config-${tag}`));

    // What a crash of the API left: a build directory of a dead API process, one named as earlier versions did,
    // and a link (whose target must survive).
    mkdirSync(buildsRoot, { recursive: true, mode: 0o711 });
    const dead = spawnSync('true').pid;
    stale.dir = join(buildsRoot, `${randomUUID()}.${dead}.AbCdEf`);
    mkdirSync(join(stale.dir, 'src/node_modules'), { recursive: true });
    writeFileSync(join(stale.dir, 'src/node_modules/big.js'), 'x'.repeat(10_000));
    stale.old = join(buildsRoot, `${randomUUID()}-Gh1jKl`);
    mkdirSync(join(stale.old, 'src'), { recursive: true });
    stale.target = mkdtempSync(join(tmpdir(), 'sandbox-link-target-'));
    writeFileSync(join(stale.target, 'keep'), 'keep');
    stale.link = join(buildsRoot, `${randomUUID()}.${dead}.MnOpQr`);
    symlinkSync(stale.target, stale.link);

    scratch = await ownPostgresDatabase('hosting_sandbox');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        BUILDER: 'local',
        DATA_DIR: dataDir,
        BACKUP_DIR: backupDir,
        PROVISIONING_DELAY_MS: '50',
        BUILD_TIMEOUT: '60s',
        BUILD_MEMORY_LIMIT: MEMORY_LIMIT,
        BUILD_DISK_LIMIT: `${DISK_LIMIT_MIB}MiB`,
      },
    });
  });

  after(async () => {
    await s?.close();
    await gitServer?.close();
    await scratch?.drop();
    for (const path of [...cleanups, closedParent, root, stale.target]) {
      if (path) rmSync(path, { recursive: true, force: true });
    }
  });

  it('builds with DATA_DIR inside a directory the build user cannot enter (mode 0700)', async () => {
    // A mktemp -d (mode 0700) outside /tmp, holding the API's data directory.
    const closed = mkdtempSync('/var/tmp/cp-sandbox-closed-');
    cleanups.push(closed);
    const data = join(closed, 'data');
    mkdirSync(join(data, 'artifacts'), { recursive: true });
    writeFileSync(join(data, 'jwt-secret'), `${secret}\n`, { mode: 0o600 });
    // Its build directories where they are by default: in a directory the build's user can enter.
    const builds = mkdtempSync(join(tmpdir(), 'sandbox-builds-'));
    chmodSync(builds, 0o711);
    cleanups.push(builds);
    const { result, lines } = await runChild({
      repo: repo('closed-data-dir', siteFiles()),
      buildsRoot: builds,
      artifactsDir: join(data, 'artifacts'),
      buildCommand: 'npm run build',
      // What earlier versions were told to hide.
      hideDirs: [data],
    });
    expect(result.state, lines.join('\n')).to.equal('succeeded');
    const { done, text } = await deploy({ git_repo: repo('plain', siteFiles()) });
    expect(done.status, text).to.equal('success');
  });

  it('removes at start the build directories a crashed API left, without following links', () => {
    expect(existsSync(stale.dir), stale.dir).to.equal(false);
    expect(existsSync(stale.old), stale.old).to.equal(false);
    expect(existsSync(stale.link), stale.link).to.equal(false);
    expect(existsSync(join(stale.target, 'keep'))).to.equal(true);
    // The sandbox's own /etc files stay.
    expect(readdirSync(buildsRoot)).to.include('.sandbox-etc');
  });

  it('shows the build an allow-list of the host: no configuration, backups, data or checkout of the API', async () => {
    // Each probe prints LEAK when it reads something, and copies what it reads into the site's output.
    const probe = [
      'mkdir -p build',
      ...hostFiles.map(
        (f, i) =>
          `if cat ${f} > build/leak-${i}.txt 2>/dev/null; then echo LEAK ${i}; else rm -f build/leak-${i}.txt; fi`,
      ),
      `if ls ${dataDir} 2>/dev/null | grep -q .; then echo LEAK data-dir; fi`,
      `if ls ${process.cwd()}/server 2>/dev/null | grep -q .; then echo LEAK api-checkout; fi`,
      `if ls /root /home /var /opt /run /etc/platform 2>/dev/null | grep -q .; then echo LEAK host-dirs; fi`,
      'if cat /etc/shadow 2>/dev/null; then echo LEAK shadow; fi',
      'if touch /usr/probe /etc/probe 2>/dev/null; then echo LEAK write; fi',
      // What a build needs still works: its tools, node, npm, certificates, its own /tmp and home.
      'node -e "require(\'os\').userInfo()" && npm --version > /dev/null && ls /etc/ssl/certs | grep -q . && echo tmp > /tmp/t && cat /tmp/t > build/tmp.txt && echo tools ok',
      'echo probes done',
    ].join('\n');
    const { done, text } = await deploy({
      git_repo: repo('allow-list', siteFiles({ 'probe.sh': `${probe}\n` })),
      build_command: 'sh probe.sh && npm run build',
    });
    expect(text.split('\n').filter((l) => l.startsWith('LEAK'))).to.deep.equal([]);
    expect(done.status, text).to.equal('success');
    expect(text).to.include('tools ok');
    expect(text).to.include('probes done');
    expect(text).not.to.include(secret);
    // Nothing of the host went into the site's output (its artifact's files), what the build made itself did.
    const manifest = JSON.parse(
      readFileSync(join(dataDir, 'artifacts', 'manifests', `${done.id}.json`), 'utf8'),
    ) as { files: Record<string, unknown> };
    expect(Object.keys(manifest.files).sort()).to.deep.equal(['/index.html', '/tmp.txt']);
  });

  it('runs a non-root API’s build as a user that cannot read the service user’s own files (0600, its home)', async function () {
    // The child runs this checkout's Node.js and code as the service user, who must be able to reach them.
    if (!othersCanReach(import.meta.filename) || !othersCanReach(process.execPath)) {
      console.warn(
        '    the checkout is under a directory closed to other users: a non-root API is not tested',
      );
      this.skip();
    }
    // The service user: a uid of its own, with a home only it can enter and a secret only it can read.
    const uid = 4000 + Math.floor(Math.random() * 1000);
    // Where a service user's home is, outside /tmp (which a sandbox may replace by its own).
    const base = mkdtempSync('/home/cp-sandbox-service-');
    cleanups.push(base);
    chmodSync(base, 0o755);
    const home = join(base, 'home');
    mkdirSync(home, { mode: 0o700 });
    const secretFile = join(home, 'platform.env');
    writeFileSync(secretFile, `DATABASE_URL=postgres://admin:${secret}@db/x\n`, { mode: 0o600 });
    for (const dir of ['builds', 'artifacts']) mkdirSync(join(base, dir));
    for (const path of [home, secretFile, join(base, 'builds'), join(base, 'artifacts')])
      chownSync(path, uid, uid);
    const buildCommand = `if cat ${secretFile}; then echo LEAK home; fi; ls ${home} && echo LEAK listed; npm run build`;
    const { result, lines } = await runChild(
      {
        repo: repo('service-user', siteFiles()),
        buildsRoot: join(base, 'builds', 'root'),
        artifactsDir: join(base, 'artifacts'),
        buildCommand,
      },
      { uid, home },
    );
    const text = lines.join('\n');
    expect(lines.filter((l) => l.startsWith('LEAK'))).to.deep.equal([]);
    expect(text).not.to.include(secret);
    expect(result.state, text).to.equal('succeeded');
  });

  it('BUILD_TIMEOUT bounds the whole deployment, not each step', async () => {
    const driver = s.deps.modules.hosting.driver as LocalHostingDriver;
    const original = driver.options.timeoutMs;
    // Each step takes about 5 s, under the limit; the two together go over it.
    driver.options.timeoutMs = 8000;
    try {
      const wait = 'node -e "setTimeout(()=>{},5000)"';
      const { done, text } = await deploy({
        git_repo: repo('slow-steps', siteFiles({}, { install: wait })),
        build_command: `${wait} && npm run build`,
      });
      expect(done.status, text).to.equal('failed');
      expect(done.status_message).to.match(/took longer than the build time limit \(BUILD_TIMEOUT, 8 s\)/);
      expect(done.status_message).to.match(/whole deployment/);
    } finally {
      driver.options.timeoutMs = original;
    }
  });

  it('a build over BUILD_MEMORY_LIMIT fails saying so', async () => {
    // 640 MiB in all, over the 200 MiB limit (without a limit it succeeds).
    const hog =
      'node -e "const a=[];for(let i=0;i<40;i++)a.push(Buffer.alloc(16*1024*1024,1));console.log(a.length)" && npm run build';
    const { done, text } = await deploy({ git_repo: repo('memory', siteFiles()), build_command: hog });
    expect(done.status, text).to.equal('failed');
    expect(done.status_message).to.match(/BUILD_MEMORY_LIMIT, 200 MiB/);
    expect(text).to.match(/BUILD_MEMORY_LIMIT/);
  });

  it('a build whose files together go over BUILD_DISK_LIMIT fails saying so, wherever it writes them', async () => {
    const chunk = 16 * MiB;
    const files = Math.ceil((DISK_LIMIT_MIB * MiB) / chunk) + 1;
    const write = (dir: string) =>
      `mkdir -p ${dir} && for i in $(seq ${files}); do head -c ${chunk} /dev/zero > ${dir}/f$i; done && sleep 1 && npm run build`;
    // Files deleted while still open count too (each under the largest file a build may write).
    const hidden = `exec 3>/tmp/h1 4>/tmp/h2 && rm /tmp/h1 /tmp/h2 && head -c ${30 * MiB} /dev/zero >&3 && head -c ${30 * MiB} /dev/zero >&4 && sleep 3 && npm run build`;
    for (const command of [write('out'), write('/tmp/x'), write('/dev/shm/x'), hidden]) {
      const { done, text } = await deploy({
        git_repo: repo(`disk-${randomUUID()}`, siteFiles()),
        build_command: command,
      });
      expect(done.status, command).to.equal('failed');
      expect(done.status_message, command).to.match(/BUILD_DISK_LIMIT, 48 MiB/);
      expect(text).to.match(/BUILD_DISK_LIMIT/);
    }
    // Nothing of them stays on the host.
    expect(readdirSync(buildsRoot).filter((n) => n.includes(`.${process.pid}.`))).to.deep.equal([]);
  });

  it('a repository whose checkout goes over BUILD_DISK_LIMIT fails at the fetch', async () => {
    // 96 MiB of zeros: a few hundred KiB in the repository, twice the limit once checked out.
    const dir = newRepo(root, 'bomb');
    writeFileSync(join(dir, 'zeros.bin'), Buffer.alloc(96 * MiB));
    commitFiles(dir, siteFiles(), 'bomb');
    git(dir, 'gc', '-q');
    const { done, text } = await deploy({ git_repo: gitServer.url('bomb') });
    expect(done.status, text).to.equal('failed');
    expect(done.status_message).to.match(/^The (fetch|checkout) stopped: .*BUILD_DISK_LIMIT, 48 MiB/);
  });

  it('still stops a fork bomb at 256 processes, and a build over its time leaves no process behind', async () => {
    const marker = `bomb-${randomBytes(4).toString('hex')}`;
    const driver = s.deps.modules.hosting.driver as LocalHostingDriver;
    const original = driver.options.timeoutMs;
    driver.options.timeoutMs = 15_000;
    // Processes past the limit are refused (EAGAIN): the first refusal is printed at once, with the count so far.
    const bomb = `const { spawn } = require('child_process');
let started = 0, told = false;
for (let i = 0; i < 400; i++) {
  const c = spawn('sleep', ['60'], { argv0: '${marker}' });
  c.on('spawn', () => started++);
  c.on('error', (e) => { if (!told) { told = true; console.log('refused ' + e.code + ' after ' + started); } });
}
setTimeout(() => {}, 60000);`;
    try {
      const { done, text } = await deploy({
        git_repo: repo('fork', siteFiles({ 'bomb.js': bomb })),
        build_command: 'node bomb.js',
      });
      expect(done.status, text).to.equal('failed');
      expect(done.status_message).to.match(/BUILD_TIMEOUT/);
      const refused = /refused (\w+) after (\d+)/.exec(text);
      expect(refused?.[1], text).to.equal('EAGAIN');
      expect(Number(refused?.[2])).to.be.at.most(256);
    } finally {
      driver.options.timeoutMs = original;
    }
    const left = readdirSync('/proc').filter((p) => {
      try {
        return /^\d+$/.test(p) && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    });
    expect(left).to.deep.equal([]);
  });
});
