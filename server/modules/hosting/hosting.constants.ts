/** Frameworks a site can be built with, and what their builds run by default (docs/sites.md, "Sites and deployments"). */
export const FRAMEWORKS = ['react', 'nextjs', 'vue', 'angular'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

export const FRAMEWORK_DEFAULTS: Record<Framework, { buildCommand: string; outputDirectory: string }> = {
  react: { buildCommand: 'npm run build', outputDirectory: 'build' },
  nextjs: { buildCommand: 'npm run build && npm run export', outputDirectory: 'out' },
  vue: { buildCommand: 'npm run build', outputDirectory: 'dist' },
  angular: { buildCommand: 'ng build --prod', outputDirectory: 'dist' },
};

/** Display names, for build logs. */
export const FRAMEWORK_NAMES: Record<Framework, string> = {
  react: 'React',
  nextjs: 'Next.js',
  vue: 'Vue',
  angular: 'Angular',
};

export const NODE_VERSIONS = ['18', '20', '22'] as const;
export type NodeVersion = (typeof NODE_VERSIONS)[number];
export const DEFAULT_NODE_VERSION: NodeVersion = '22';

export const DEFAULT_BRANCH = 'main';

/** A site serves once it has a live deployment; there is no other state yet. */
export const SITE_STATUSES = ['active'] as const;
export type SiteStatus = (typeof SITE_STATUSES)[number];

/** Sites are served from every edge location. */
export const SITE_REGION = 'global';

export const DEPLOYMENT_STATUSES = ['queued', 'building', 'success', 'failed', 'canceled'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
/** States a deployment never leaves. */
export const FINAL_DEPLOYMENT_STATUSES: readonly DeploymentStatus[] = ['success', 'failed', 'canceled'];

export const LOG_STREAMS = ['stdout', 'stderr'] as const;
export type LogStream = (typeof LOG_STREAMS)[number];

/** Limits of the input (docs/sites.md, "Sites and deployments"). */
export const LIMITS = {
  nameLength: 100,
  gitRepoLength: 2048,
  domainLength: 253,
  branchLength: 255,
  buildCommandLength: 1000,
  outputDirectoryLength: 255,
  messageLength: 500,
  envNames: 100,
  envNameLength: 128,
  envValueBytes: 4 * 1024,
  envTotalBytes: 64 * 1024,
  /** Slugs stay short enough that `<slug>-<short id>` is a valid DNS label (63). */
  slugLength: 40,
} as const;

/** Characters of a deployment id's opaque part used in its preview address. */
export const SHORT_ID_LENGTH = 8;

/** Log lines per page of `GET …/logs` (and per read of a follower catching up). */
export const DEFAULT_LOG_LIMIT = 100;
export const MAX_LOG_LIMIT = 1000;

/** Who builds deployments (`BUILDER`): the simulation (test mode) or real builds on this machine (docs/hosting.md). */
export const BUILDERS = ['simulated', 'local'] as const;
export type Builder = (typeof BUILDERS)[number];
