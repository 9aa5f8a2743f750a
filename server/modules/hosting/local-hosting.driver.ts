import {
  chmod,
  chown,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  realpath,
  rename,
  rm,
  writeFile,
} from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import type { AddressPolicy, Resolver } from '../../lib/safe-http.js';
import type { ArtifactStore } from './artifact-store.js';
import { ArtifactError } from './artifact-store.js';
import type { SANDBOX_ETC_FILES } from './build-process.js';
import {
  bubblewrapAvailable,
  buildPath,
  nodeInstallDir,
  othersCanReach,
  runBuildCommand,
  SANDBOX_BUILD_DIR,
  type RunResult,
  type SandboxSpec,
} from './build-process.js';
import { BuildCgroup, diskUsage, formatBytes, removeStaleCgroups, watchDisk } from './build-limits.js';
import { secretMasker } from './secret-masker.js';
import { gitEnv, gitSafetyOptions, resolveGitTarget } from './git-fetch.js';
import type {
  BuildIo,
  BuildOutput,
  ProcessBuildResult,
  ProcessHostingDriver,
  RealBuildSpec,
} from './hosting.driver.js';

export interface LocalBuilderOptions {
  policy: AddressPolicy;
  sandbox: 'bwrap' | 'none';
  /** The whole deployment's time: fetch, install, build and store (`BUILD_TIMEOUT`). */
  timeoutMs: number;
  concurrency: number;
  store: ArtifactStore;
  /** Memory of the build's processes together (`BUILD_MEMORY_LIMIT`, a cgroup where the host has them). */
  memoryLimit: number;
  /** Every file of the build together, checkout and /tmp included (`BUILD_DISK_LIMIT`). */
  diskLimit: number;
  /** Where build directories are made (one per build, removed after it). */
  buildsRoot?: string;
  resolver?: Resolver;
}

/** Log bytes a build may print (each command). */
const MAX_OUTPUT_BYTES = 5 * 1024 * 1024;
const MAX_PROCESSES = 256;
const MAX_FILE_BYTES = 512 * 1024 * 1024;
/** The user a build runs as when the API runs as root. */
const NOBODY = 65534;
/** The sandbox's own /etc files (bwrapArgs), kept beside the build directories. */
const ETC_DIR = '.sandbox-etc';
const SANDBOX_ETC: Record<(typeof SANDBOX_ETC_FILES)[number], string> = {
  passwd: `root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nnobody:x:${NOBODY}:${NOBODY}:build:${SANDBOX_BUILD_DIR}/home:/bin/sh\n`,
  group: `root:x:0:\nnogroup:x:${NOBODY}:\n`,
  hosts: '127.0.0.1 localhost\n::1 localhost\n',
  'nsswitch.conf': 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n',
};
/** A copy of the Node.js install that builds reach when its own directory is closed to them (nodeDirForBuilds). */
const NODE_COPY_PREFIX = '.node-';
const execFileP = promisify(execFile);
/** The build directories of every build running in this process (a second driver in it must not remove them). */
const liveBuilds = new Set<string>();
/** A build directory's name: `<deployment>.<pid of the API process>.<random>` (a start removes those of dead ones). */
const BUILD_DIR_NAME = /^[^.]+\.(\d+)\.[^.]+$/;

const out = (message: string): BuildOutput => ({ stream: 'stdout', message });
const err = (message: string): BuildOutput => ({ stream: 'stderr', message });

/**
 * Real builds on this machine (docs/hosting.md): fetch the repository through the address rules, install and run
 * the build command in bubblewrap, store the output directory as the deployment's artifact.
 */
export class LocalHostingDriver implements ProcessHostingDriver {
  readonly kind = 'process';
  readonly concurrency: number;
  private readonly buildsRoot: string;

  /** The options it was made with (a test shortens the time limit). */
  readonly options: LocalBuilderOptions;
  private get o(): LocalBuilderOptions {
    return this.options;
  }

  constructor(o: LocalBuilderOptions) {
    this.options = o;
    this.concurrency = o.concurrency;
    this.buildsRoot = resolve(o.buildsRoot ?? join(tmpdir(), 'cloud-platform-builds'));
  }

  /** Build directories of this process's running builds (by name), whichever driver of the process runs them. */
  private readonly live = liveBuilds;

  /**
   * Makes the builds root (a directory of this API's user, never a link another user planted there) and the
   * sandbox's /etc files in it.
   */
  private async prepareRoot(): Promise<void> {
    await mkdir(this.buildsRoot, { recursive: true, mode: 0o711 });
    const st = await lstat(this.buildsRoot);
    if (!st.isDirectory() || st.uid !== process.getuid?.()) {
      throw new Error(`${this.buildsRoot} is not a directory of this API's user: builds cannot run`);
    }
    // Enterable by the build's user (it reaches its own directory through it), listable by no one else.
    await chmod(this.buildsRoot, 0o711);
    // Written again should something (a cleaner of old temporary files) have removed them.
    if (!this.etcWritten || !existsSync(join(this.buildsRoot, ETC_DIR, 'passwd'))) {
      this.etcWritten = this.writeEtc().catch((e: unknown) => {
        this.etcWritten = undefined;
        throw e;
      });
    }
    await this.etcWritten;
    this.nodeDir ??= this.nodeDirForBuilds().catch((e: unknown) => {
      this.nodeDir = undefined;
      throw e;
    });
    this.nodeReached = await this.nodeDir;
  }

  /** Where builds reach the Node.js that runs them (SandboxSpec.nodeDir), found once per driver. */
  private nodeDir: Promise<string> | undefined;
  private nodeReached = nodeInstallDir();
  /**
   * The Node.js install when the build's user can reach it; otherwise (an install under a 0700 directory, such as
   * a checkout in a `mktemp -d`) a copy of it in the builds root, hard links where the file system allows, made
   * once per Node.js version and shown inside at the install's own path.
   */
  private async nodeDirForBuilds(): Promise<string> {
    const install = nodeInstallDir();
    if (install === '/usr' || install.startsWith('/usr/') || othersCanReach(install)) return install;
    const copy = join(this.buildsRoot, `${NODE_COPY_PREFIX}${process.version}`);
    if (existsSync(join(copy, '.complete'))) return copy;
    const tmp = `${copy}.${process.pid}.${randomBytes(6).toString('hex')}`;
    try {
      await execFileP('cp', ['-al', install, tmp]).catch(async () => {
        await rm(tmp, { recursive: true, force: true });
        await execFileP('cp', ['-a', install, tmp]);
      });
      await chmod(tmp, 0o755);
      await writeFile(join(tmp, '.complete'), '', { mode: 0o644 });
      // Another driver may have finished its copy first: theirs is as good.
      await rename(tmp, copy).catch((e: unknown) => {
        if (!existsSync(join(copy, '.complete'))) throw e;
      });
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    return copy;
  }

  /** The sandbox's /etc files, written once per driver. */
  private etcWritten: Promise<void> | undefined;
  private async writeEtc(): Promise<void> {
    const etc = join(this.buildsRoot, ETC_DIR);
    await mkdir(etc, { recursive: true, mode: 0o755 });
    for (const [file, text] of Object.entries(SANDBOX_ETC)) {
      // A name of its own per write: two drivers of one process (or two builds starting at once) write these
      // files at the same moment, and a shared temporary name was renamed away under the other writer.
      const tmp = join(etc, `.${file}.${process.pid}.${randomBytes(6).toString('hex')}`);
      await writeFile(tmp, text, { mode: 0o644 });
      await rename(tmp, join(etc, file));
    }
  }

  /**
   * Removes what builds left behind when the API that ran them stopped without cleaning up (a crash, a kill): the
   * build directories of this builds root whose API process is gone, and their cgroups (docs/hosting.md, "The
   * sandbox"). Links are removed, never followed.
   */
  async removeStale(): Promise<void> {
    const entries = await readdir(this.buildsRoot, { withFileTypes: true }).catch(() => []);
    const isLive = (name: string): boolean => {
      if (this.live.has(name)) return true;
      const m = BUILD_DIR_NAME.exec(name);
      if (!m || Number(m[1]) === process.pid) return false;
      try {
        process.kill(Number(m[1]), 0);
        return true;
      } catch (e) {
        return (e as NodeJS.ErrnoException).code === 'EPERM';
      }
    };
    for (const e of entries) {
      if (e.name === ETC_DIR || e.name.startsWith(NODE_COPY_PREFIX) || isLive(e.name)) continue;
      await rm(join(this.buildsRoot, e.name), { recursive: true, force: true }).catch(() => undefined);
    }
    await removeStaleCgroups(isLive);
  }

  async build(spec: RealBuildSpec, io: BuildIo): Promise<ProcessBuildResult> {
    const { o } = this;
    // BUILD_TIMEOUT bounds the whole deployment: each step gets what the ones before it left.
    const deadline = Date.now() + o.timeoutMs;
    if (o.sandbox === 'bwrap' && !bubblewrapAvailable()) {
      const reason =
        'The build cannot start: bubblewrap (bwrap) is not installed on the build machine (BUILD_SANDBOX)';
      io.output([err(reason)]);
      return { state: 'failed', reason };
    }
    await this.prepareRoot();
    const buildDir = await mkdtemp(join(this.buildsRoot, `${spec.deploymentId}.${process.pid}.`));
    const name = basename(buildDir);
    this.live.add(name);
    const asNobody = o.sandbox === 'bwrap' && process.getuid?.() === 0;
    const cgroup =
      o.sandbox === 'bwrap'
        ? await BuildCgroup.create(name, o.memoryLimit, asNobody ? NOBODY : undefined)
        : undefined;
    // The disk limit: a watch over every file of the build directory, which aborts the build when it goes over.
    const limits = new AbortController();
    const stop = () => limits.abort();
    if (io.signal.aborted) stop();
    else io.signal.addEventListener('abort', stop, { once: true });
    const disk = { over: undefined as number | undefined };
    const watch = watchDisk(
      buildDir,
      o.diskLimit,
      (bytes) => {
        disk.over = bytes;
        stop();
      },
      async () => (cgroup ? cgroup.pids() : []),
    );
    try {
      return await this.run(spec, { ...io, signal: limits.signal }, buildDir, {
        deadline,
        cgroup,
        disk,
        asNobody,
      });
    } finally {
      watch.stop();
      io.signal.removeEventListener('abort', stop);
      await cgroup?.remove();
      await rm(buildDir, { recursive: true, force: true }).catch(() => undefined);
      this.live.delete(name);
    }
  }

  private async run(
    spec: RealBuildSpec,
    io: BuildIo,
    buildDir: string,
    limits: {
      deadline: number;
      cgroup: BuildCgroup | undefined;
      disk: { over: number | undefined };
      asNobody: boolean;
    },
  ): Promise<ProcessBuildResult> {
    const { o } = this;
    const fail = (reason: string): ProcessBuildResult => {
      io.output([err(`Build failed: ${reason}`)]);
      return { state: 'failed', reason };
    };
    const mask = secretMasker(Object.values(spec.environment));
    const sandboxed = o.sandbox === 'bwrap';
    const src = join(buildDir, 'src');
    const home = join(buildDir, 'home');
    // Inside the sandbox the build directory is /build; its tmp and shm are /tmp and /dev/shm (bwrapArgs).
    const inside = (path: string) => (sandboxed ? join(SANDBOX_BUILD_DIR, relative(buildDir, path)) : path);
    for (const dir of [home, join(buildDir, 'tmp'), join(buildDir, 'shm')]) await mkdir(dir);
    const remaining = () => Math.max(1, limits.deadline - Date.now());
    const run = (argv: string[], cwd: string, env: Record<string, string>, inSandbox: boolean) =>
      runBuildCommand({
        argv,
        cwd: inSandbox ? inside(cwd) : cwd,
        env,
        timeoutMs: remaining(),
        signal: io.signal,
        maxOutputBytes: MAX_OUTPUT_BYTES,
        mask,
        onLine: (stream, message) => io.output([{ stream, message }]),
        ...(inSandbox && sandboxed ? { sandbox: this.sandboxSpec(buildDir, limits.cgroup) } : {}),
      });
    const timeLimit = () =>
      `took longer than the build time limit (BUILD_TIMEOUT, ${Math.round(o.timeoutMs / 1000)} s), which bounds the whole deployment`;
    const diskLimit = (bytes: number) =>
      `the build's files went over the disk limit (BUILD_DISK_LIMIT, ${formatBytes(o.diskLimit)}; ${formatBytes(bytes)} written)`;
    /** The files of the build now, over the limit or not (the watch may not have measured since the last write). */
    const overDisk = async (): Promise<string | undefined> => {
      if (limits.disk.over === undefined) {
        const used = await diskUsage(buildDir, limits.cgroup ? await limits.cgroup.pids() : []);
        if (used !== undefined && used > o.diskLimit) limits.disk.over = used;
      }
      return limits.disk.over === undefined ? undefined : diskLimit(limits.disk.over);
    };
    const explain = async (r: RunResult, what: string): Promise<string | undefined> => {
      const disk = await overDisk();
      if (disk) return `${what} stopped: ${disk}`;
      // The largest file allowed is the disk limit (maxFileBytes): a process stopped there went over it (a shell
      // reports its child's SIGXFSZ as 153).
      if (r.outcome === 'exited' && (r.signal === 'SIGXFSZ' || r.code === 128 + 25)) {
        return `${what} stopped: a file went over the disk limit (BUILD_DISK_LIMIT, ${formatBytes(o.diskLimit)})`;
      }
      if (r.outcome !== 'canceled' && limits.cgroup && (await limits.cgroup.outOfMemory())) {
        return `${what} ran out of memory: the build's processes together went over the memory limit (BUILD_MEMORY_LIMIT, ${formatBytes(o.memoryLimit)})`;
      }
      switch (r.outcome) {
        case 'timed-out':
          return `${what} ${timeLimit()}`;
        case 'canceled':
          return 'canceled';
        case 'output-limit':
          return `${what} printed more than ${MAX_OUTPUT_BYTES / 1024 / 1024} MiB`;
        case 'spawn-failed':
          return `${what} could not be started`;
        default:
          return r.code === 0 ? undefined : `${what} exited with status ${r.code ?? 'unknown'}`;
      }
    };

    // 1. Fetch, on the host (git is trusted; the repository's content is not run).
    const target = await resolveGitTarget(spec.gitRepo, o.policy, o.resolver);
    if (!target.ok) return fail(`refused to fetch ${spec.gitRepo}: ${target.reason}`);
    const ref = spec.commitPinned ? spec.commit : spec.branch;
    io.output([out(`Fetching ${spec.gitRepo} (${spec.commitPinned ? 'commit' : 'branch'} ${ref})`)]);
    // Git writes no file larger than the disk limit (the watch bounds their sum), as the build itself.
    const git = (args: string[], cwd = buildDir) =>
      run(
        [
          'prlimit',
          `--fsize=${this.maxFileBytes()}`,
          '--',
          'git',
          ...gitSafetyOptions(target, o.policy),
          ...args,
        ],
        cwd,
        gitEnv(home, buildPath()),
        false,
      );
    // A step that did not end by itself, or that went over a limit: the reason, whatever its exit status.
    const stopped = async (r: RunResult, what: string) =>
      r.outcome !== 'exited' || (await overDisk()) ? explain(r, what) : undefined;
    let why: string | undefined;
    let r = await git(['init', '-q', src]);
    if ((why = await explain(r, 'git init'))) return fail(why);
    const fetchRef = (what: string, depth: number) =>
      git(['fetch', '-q', '--no-tags', `--depth=${depth}`, '--', target.url, what], src);
    if (spec.commitPinned) {
      // A full SHA is asked for directly; a short one (or a server that refuses) through the branch's history.
      r = spec.commit.length === 40 ? await fetchRef(spec.commit, 1) : { code: 1, outcome: 'exited' };
      if ((why = await stopped(r, 'The fetch'))) return fail(why);
      if (r.code !== 0) {
        r = await fetchRef(`refs/heads/${spec.branch}`, 200);
        if ((why = await explain(r, 'The fetch'))) return fail(why);
      }
      r = await git(['checkout', '-q', '--detach', `${spec.commit}^{commit}`], src);
      if ((why = await stopped(r, 'The checkout'))) return fail(why);
      if (r.code !== 0) return fail(`commit ${spec.commit} was not found on branch ${spec.branch}`);
    } else {
      r = await fetchRef(`refs/heads/${spec.branch}`, 1);
      if ((why = await stopped(r, 'The fetch'))) return fail(why);
      if (r.code !== 0) return fail(`branch ${spec.branch} could not be fetched from ${spec.gitRepo}`);
      r = await git(['checkout', '-q', '--detach', 'FETCH_HEAD'], src);
      if ((why = await explain(r, 'The checkout'))) return fail(why);
    }
    let head = '';
    const headRun = await runBuildCommand({
      argv: ['git', 'rev-parse', 'HEAD'],
      cwd: src,
      env: gitEnv(home, buildPath()),
      timeoutMs: Math.min(10_000, remaining()),
      signal: io.signal,
      maxOutputBytes: 1024,
      mask: (s) => s,
      onLine: (_, line) => (head ||= line.trim()),
    });
    if ((why = await stopped(headRun, 'The fetch'))) return fail(why);
    if (headRun.code !== 0 || !/^[0-9a-f]{40}$/.test(head))
      return fail('the fetched commit could not be read');
    io.commit(head);
    io.output([out(`Fetched commit ${head.slice(0, 7)}`)]);
    await rm(join(src, '.git'), { recursive: true, force: true });

    // The build runs as nobody: it owns its directory and nothing else.
    if (limits.asNobody) await chownTree(buildDir, NOBODY, NOBODY);

    // 2. Install and build, in the sandbox, with the site's variables and nothing of the server's environment.
    const env: Record<string, string> = {
      ...spec.environment,
      PATH: buildPath(),
      HOME: inside(home),
      TMPDIR: sandboxed ? '/tmp' : join(buildDir, 'tmp'),
      CI: 'true',
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      npm_config_audit: 'false',
      // No network in the sandbox: npm answers from what the repository brings instead of retrying for minutes.
      ...(o.sandbox === 'bwrap' ? { npm_config_offline: 'true' } : {}),
    };
    const names = spec.environmentVariableNames;
    if (names.length > 0) {
      io.output([
        out(
          `Injecting ${names.length} environment variable${names.length === 1 ? '' : 's'}: ` +
            (names.length > 10 ? `${names.slice(0, 10).join(', ')}, …` : names.join(', ')),
        ),
      ]);
    }
    const pkg = await lstat(join(src, 'package.json')).catch(() => undefined);
    if (pkg?.isFile()) {
      const lock = await lstat(join(src, 'package-lock.json')).catch(() => undefined);
      const install = lock?.isFile() ? 'npm ci' : 'npm install';
      io.output([out(`Running "${install}"`)]);
      r = await run(['/bin/sh', '-c', install], src, env, true);
      if ((why = await explain(r, `"${install}"`))) return fail(why);
    }
    io.output([out(`Running build command: ${mask(spec.buildCommand)}`)]);
    r = await run(['/bin/sh', '-c', spec.buildCommand], src, env, true);
    if ((why = await explain(r, 'The build command'))) return fail(why);

    // 3. The output directory, inside the checkout, without following links out of it.
    const outDir = resolve(src, spec.outputDirectory);
    if (outDir !== src && !outDir.startsWith(src + sep)) {
      return fail(`the output directory ${spec.outputDirectory} is outside the repository`);
    }
    const st = await lstat(outDir).catch(() => undefined);
    if (!st?.isDirectory()) {
      return fail(`the output directory ${spec.outputDirectory} does not exist after the build`);
    }
    const real = await realpath(outDir);
    if (real !== (await realpath(src)) && !real.startsWith((await realpath(src)) + sep)) {
      return fail(`the output directory ${spec.outputDirectory} leads outside the repository`);
    }
    const index = await lstat(join(outDir, 'index.html')).catch(() => undefined);
    if (!index?.isFile()) return fail(`the output directory ${spec.outputDirectory} has no index.html`);
    try {
      // The store is the deployment's last step, within what is left of its time.
      const put = o.store.put(spec.deploymentId, outDir);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), remaining())));
      const stored = await Promise.race([put, late]).finally(() => clearTimeout(timer));
      if (stored === 'late') {
        put.catch(() => undefined);
        return fail(`Storing the output ${timeLimit()}`);
      }
      const { manifest, skipped } = stored;
      for (const s of skipped.slice(0, 20))
        io.output([err(`Skipped ${s}: not a regular file (links are not followed)`)]);
      const files = Object.keys(manifest.files).length;
      io.output([
        out(`Stored ${files} files (${manifest.bytes} bytes) from ${relative(src, outDir) || '.'}/`),
        out(`Deployment ready at ${spec.url}`),
      ]);
      return { state: 'succeeded', files, bytes: manifest.bytes };
    } catch (e) {
      if (e instanceof ArtifactError) return fail(e.message);
      throw e;
    }
  }

  /**
   * Largest file a build (or its checkout) may write: no more than its whole disk limit (a byte over it, so that a
   * single file stopped there is seen as over the limit).
   */
  private maxFileBytes(): number {
    return Math.min(MAX_FILE_BYTES, this.o.diskLimit + 1);
  }

  private sandboxSpec(buildDir: string, cgroup: BuildCgroup | undefined): SandboxSpec {
    return {
      buildDir,
      etcDir: join(this.buildsRoot, ETC_DIR),
      nodeDir: this.nodeReached,
      maxProcesses: MAX_PROCESSES,
      maxFileBytes: this.maxFileBytes(),
      ...(cgroup ? { cgroupProcs: cgroup.procs } : {}),
    };
  }
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await chown(dir, uid, gid);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(full, uid, gid);
    else if (!entry.isSymbolicLink()) await chown(full, uid, gid);
  }
}
