import type { Framework, LogStream, NodeVersion } from './hosting.constants.js';

/**
 * The builder (`BUILDER`, docs/hosting.md): the simulated one (simulated-hosting.driver.ts, the test mode) or real
 * builds on this machine (local-hosting.driver.ts).
 *
 * The simulated build is a fixed number of steps. The job queue runs one step at a time (builds.service.ts): step 0 when the
 * deployment starts building, the next ones spread over `PROVISIONING_DELAY_MS`, each in a job of its own, so a
 * build survives a restart between two steps. A step may run again after a crash, so it must not assume it ran
 * once: what it returns is written only if the build is still at that step.
 */
export interface SteppedHostingDriver {
  readonly kind: 'steps';
  /** Steps of a build (at least 2: the first starts it, the last ends it). */
  readonly steps: number;
  runStep(step: number, build: BuildSpec): Promise<BuildStepResult>;
}

/**
 * A real builder (local-hosting.driver.ts): a build is one long process whose output streams as it comes. The job
 * chain (builds.service.ts) starts it in the background, writes its lines as they arrive, and ends the deployment
 * with its result; `signal` aborts it (cancel, the site deleted, the process stopping).
 */
export interface ProcessHostingDriver {
  readonly kind: 'process';
  /** Builds that may run at once in this process (`BUILD_CONCURRENCY`). */
  readonly concurrency: number;
  build(spec: RealBuildSpec, io: BuildIo): Promise<ProcessBuildResult>;
}

export type HostingDriver = SteppedHostingDriver | ProcessHostingDriver;

export interface RealBuildSpec extends BuildSpec {
  /** The site's variables, given to the install and the build only; their values are masked in the log. */
  environment: Record<string, string>;
  /** `commit` was asked for; otherwise the head of `branch` is built and reported through `io.commit`. */
  commitPinned: boolean;
}

export interface BuildIo {
  output(lines: BuildOutput[]): void;
  /** The commit actually fetched. */
  commit(sha: string): void;
  signal: AbortSignal;
}

export type ProcessBuildResult =
  { state: 'succeeded'; files: number; bytes: number } | { state: 'failed'; reason: string };

/** What the builder is asked to build (the settings copied to the deployment when it was queued). */
export interface BuildSpec {
  deploymentId: string;
  siteId: string;
  gitRepo: string;
  branch: string;
  commit: string;
  framework: Framework;
  buildCommand: string;
  outputDirectory: string;
  nodeVersion: NodeVersion;
  /** Names only: values never reach the log. */
  environmentVariableNames: string[];
  /** Where the deployment will be served once it succeeds. */
  url: string;
}

export interface BuildOutput {
  stream: LogStream;
  message: string;
}

export type BuildStepResult =
  | { state: 'running'; output: BuildOutput[] }
  | { state: 'succeeded'; output: BuildOutput[] }
  | { state: 'failed'; output: BuildOutput[]; reason: string };
