import type { Framework, LogStream, NodeVersion } from './hosting.constants.js';

/**
 * The builder: what a real platform would run in a sandbox (clone, install, build, upload to the edge). No builder
 * is reachable from this service, so the module runs the simulated one (simulated-hosting.driver.ts); another
 * implementation only has to honour this interface.
 *
 * A build is a fixed number of steps. The job queue runs one step at a time (hosting.jobs.ts): step 0 when the
 * deployment starts building, the next ones spread over `PROVISIONING_DELAY_MS`, each in a job of its own, so a
 * build survives a restart between two steps. A step may run again after a crash, so it must not assume it ran
 * once: what it returns is written only if the build is still at that step.
 */
export interface HostingDriver {
  /** Steps of a build (at least 2: the first starts it, the last ends it). */
  readonly steps: number;
  runStep(step: number, build: BuildSpec): Promise<BuildStepResult>;
}

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
