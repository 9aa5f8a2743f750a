import { randomUUID } from 'node:crypto';
import { DirectoryArtifactStore } from '../../../server/modules/hosting/artifact-store.js';
import { LocalHostingDriver } from '../../../server/modules/hosting/local-hosting.driver.js';
import type { RealBuildSpec } from '../../../server/modules/hosting/hosting.driver.js';

/**
 * One real build by the local driver in a process of its own, so that a test can run it as another user than the
 * test's (an API whose service user is not root): `SANDBOX_CHILD` holds the build's settings as JSON; it prints
 * `{ result, lines }` as one JSON line.
 */
const input = JSON.parse(process.env.SANDBOX_CHILD ?? '{}') as {
  repo: string;
  buildsRoot: string;
  artifactsDir: string;
  buildCommand: string;
  hideDirs?: string[];
};
const driver = new LocalHostingDriver({
  policy: { allowPrivate: true },
  sandbox: 'bwrap',
  timeoutMs: 60_000,
  concurrency: 1,
  store: new DirectoryArtifactStore(input.artifactsDir, 50_000_000),
  memoryLimit: 512 * 1024 ** 2,
  diskLimit: 256 * 1024 ** 2,
  buildsRoot: input.buildsRoot,
  // What the driver of earlier versions was given to hide (it shows the host's / otherwise).
  ...({ hideDirs: input.hideDirs ?? [], hideFiles: [] } as object),
});
const lines: string[] = [];
const spec = {
  deploymentId: `dep_${randomUUID().replace(/-/g, '')}`,
  siteId: randomUUID(),
  gitRepo: input.repo,
  branch: 'main',
  commit: '',
  framework: 'static',
  buildCommand: input.buildCommand,
  outputDirectory: 'build',
  nodeVersion: '22',
  environmentVariableNames: [],
  url: 'https://child.example.test',
  environment: {},
  commitPinned: false,
} as unknown as RealBuildSpec;
const result = await driver.build(spec, {
  output: (out) => lines.push(...out.map((o) => o.message)),
  commit: () => undefined,
  signal: new AbortController().signal,
});
process.stdout.write(`${JSON.stringify({ result, lines })}\n`);
