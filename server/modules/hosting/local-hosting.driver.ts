import { chown, lstat, mkdir, mkdtemp, readdir, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import type { AddressPolicy, Resolver } from '../../lib/safe-http.js';
import type { ArtifactStore } from './artifact-store.js';
import { ArtifactError } from './artifact-store.js';
import {
  bubblewrapAvailable,
  buildPath,
  runBuildCommand,
  secretMasker,
  type RunResult,
  type SandboxSpec,
} from './build-process.js';
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
  timeoutMs: number;
  concurrency: number;
  store: ArtifactStore;
  /** Directories a build must never see (the API's data, the artifact store). */
  hideDirs: string[];
  /** Files a build must never see (TLS key, `.env`). */
  hideFiles: string[];
  /** Where build directories are made (one per build, removed after it). */
  buildsRoot?: string;
  resolver?: Resolver;
}

/** Log bytes a build may print (each command). */
const MAX_OUTPUT_BYTES = 5 * 1024 * 1024;
const MAX_PROCESSES = 256;
const MAX_FILE_BYTES = 512 * 1024 * 1024;

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

  async build(spec: RealBuildSpec, io: BuildIo): Promise<ProcessBuildResult> {
    const { o } = this;
    if (o.sandbox === 'bwrap' && !bubblewrapAvailable()) {
      const reason =
        'The build cannot start: bubblewrap (bwrap) is not installed on the build machine (BUILD_SANDBOX)';
      io.output([err(reason)]);
      return { state: 'failed', reason };
    }
    await mkdir(this.buildsRoot, { recursive: true, mode: 0o711 });
    const buildDir = await mkdtemp(join(this.buildsRoot, `${spec.deploymentId}-`));
    try {
      return await this.run(spec, io, buildDir);
    } finally {
      await rm(buildDir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  private async run(spec: RealBuildSpec, io: BuildIo, buildDir: string): Promise<ProcessBuildResult> {
    const { o } = this;
    const fail = (reason: string): ProcessBuildResult => {
      io.output([err(`Build failed: ${reason}`)]);
      return { state: 'failed', reason };
    };
    const mask = secretMasker(Object.values(spec.environment));
    const src = join(buildDir, 'src');
    const home = join(buildDir, 'home');
    await mkdir(home);
    const run = (argv: string[], cwd: string, env: Record<string, string>, sandboxed: boolean) =>
      runBuildCommand({
        argv,
        cwd,
        env,
        timeoutMs: o.timeoutMs,
        signal: io.signal,
        maxOutputBytes: MAX_OUTPUT_BYTES,
        mask,
        onLine: (stream, message) => io.output([{ stream, message }]),
        ...(sandboxed && o.sandbox === 'bwrap' ? { sandbox: this.sandboxSpec(buildDir) } : {}),
      });
    const explain = (r: RunResult, what: string): string | undefined => {
      switch (r.outcome) {
        case 'timed-out':
          return `${what} took longer than the build time limit (BUILD_TIMEOUT, ${Math.round(o.timeoutMs / 1000)} s)`;
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
    const git = (args: string[], cwd = buildDir) =>
      run(['git', ...gitSafetyOptions(target, o.policy), ...args], cwd, gitEnv(home, buildPath()), false);
    let r = await git(['init', '-q', src]);
    if (explain(r, 'git init')) return fail(explain(r, 'git init')!);
    const fetchRef = (what: string, depth: number) =>
      git(['fetch', '-q', '--no-tags', `--depth=${depth}`, '--', target.url, what], src);
    if (spec.commitPinned) {
      // A full SHA is asked for directly; a short one (or a server that refuses) through the branch's history.
      r = spec.commit.length === 40 ? await fetchRef(spec.commit, 1) : { code: 1, outcome: 'exited' };
      if (r.outcome !== 'exited') return fail(explain(r, 'The fetch')!);
      if (r.code !== 0) {
        r = await fetchRef(`refs/heads/${spec.branch}`, 200);
        if (explain(r, 'The fetch')) return fail(explain(r, 'The fetch')!);
      }
      r = await git(['checkout', '-q', '--detach', `${spec.commit}^{commit}`], src);
      if (r.outcome !== 'exited') return fail(explain(r, 'The checkout')!);
      if (r.code !== 0) return fail(`commit ${spec.commit} was not found on branch ${spec.branch}`);
    } else {
      r = await fetchRef(`refs/heads/${spec.branch}`, 1);
      if (r.outcome !== 'exited') return fail(explain(r, 'The fetch')!);
      if (r.code !== 0) return fail(`branch ${spec.branch} could not be fetched from ${spec.gitRepo}`);
      r = await git(['checkout', '-q', '--detach', 'FETCH_HEAD'], src);
      if (explain(r, 'The checkout')) return fail(explain(r, 'The checkout')!);
    }
    let head = '';
    const headRun = await runBuildCommand({
      argv: ['git', 'rev-parse', 'HEAD'],
      cwd: src,
      env: gitEnv(home, buildPath()),
      timeoutMs: 10_000,
      signal: io.signal,
      maxOutputBytes: 1024,
      mask: (s) => s,
      onLine: (_, line) => (head ||= line.trim()),
    });
    if (headRun.code !== 0 || !/^[0-9a-f]{40}$/.test(head))
      return fail('the fetched commit could not be read');
    io.commit(head);
    io.output([out(`Fetched commit ${head.slice(0, 7)}`)]);
    await rm(join(src, '.git'), { recursive: true, force: true });

    // The build runs as nobody: it owns its directory and nothing else.
    if (o.sandbox === 'bwrap' && process.getuid?.() === 0) await chownTree(buildDir, 65534, 65534);

    // 2. Install and build, in the sandbox, with the site's variables and nothing of the server's environment.
    const env: Record<string, string> = {
      ...spec.environment,
      PATH: buildPath(),
      HOME: home,
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
      if (explain(r, `"${install}"`)) return fail(explain(r, `"${install}"`)!);
    }
    io.output([out(`Running build command: ${mask(spec.buildCommand)}`)]);
    r = await run(['/bin/sh', '-c', spec.buildCommand], src, env, true);
    if (explain(r, 'The build command')) return fail(explain(r, 'The build command')!);

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
      const { manifest, skipped } = await o.store.put(spec.deploymentId, outDir);
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

  private sandboxSpec(buildDir: string): SandboxSpec {
    return {
      buildDir,
      // The other builds (their directories sit beside this one), the API's data and the artifacts.
      hideDirs: [this.buildsRoot, ...this.o.hideDirs],
      hideFiles: this.o.hideFiles,
      maxProcesses: MAX_PROCESSES,
      maxFileBytes: MAX_FILE_BYTES,
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
