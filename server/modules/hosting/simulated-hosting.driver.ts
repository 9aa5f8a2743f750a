import { createHash } from 'node:crypto';
import { checkTargetUrl, type AddressPolicy, type Resolver } from '../../lib/safe-http.js';
import { FRAMEWORK_NAMES, type Framework } from './hosting.constants.js';
import type { BuildOutput, BuildSpec, BuildStepResult, SteppedHostingDriver } from './hosting.driver.js';
import { humanBytes } from './hosting.simulation.js';

const out = (message: string): BuildOutput => ({ stream: 'stdout', message });
const err = (message: string): BuildOutput => ({ stream: 'stderr', message });

/** What each framework's build prints (shortened). */
const BUILD_OUTPUT: Record<Framework, (hash: string) => string[]> = {
  react: () => ['Creating an optimized production build...', 'Compiled successfully.'],
  nextjs: () => [
    'info  - Creating an optimized production build',
    'info  - Compiled successfully',
    'info  - Exporting (3/3)',
  ],
  vue: () => ['Building for production...', 'DONE  Build complete.'],
  angular: (hash) => ['Generating browser application bundles...', `Build at: Hash: ${hash.slice(0, 20)}`],
};

/**
 * The simulated builder (docs/sites.md, "Sites and deployments"): five steps, each writing what a real build prints.
 *
 * 0. clone: checks `git_repo` against the address rules again (the repository host may resolve elsewhere by now;
 *    a refused address fails the build);
 * 1. install: the Node.js version, the names of the injected environment variables, `npm install`;
 * 2. build: runs the build command; a command containing `exit 1` fails the build;
 * 3. upload: the output directory;
 * 4. the deployment is ready.
 *
 * Figures in the output (file counts, sizes) are drawn from the deployment id, so a step that runs again prints the
 * same.
 */
export class SimulatedHostingDriver implements SteppedHostingDriver {
  readonly kind = 'steps';
  readonly steps = 5;

  constructor(
    private readonly policy: AddressPolicy,
    private readonly resolver?: Resolver,
  ) {}

  async runStep(step: number, b: BuildSpec): Promise<BuildStepResult> {
    const h = createHash('sha256').update(b.deploymentId).digest();
    const n = (i: number, min: number, span: number) => min + (h.readUInt16BE(i * 2) % span);
    const files = n(0, 40, 400);
    switch (step) {
      case 0: {
        const check = await checkTargetUrl(b.gitRepo, this.policy, this.resolver);
        if (!check.ok || check.url.protocol !== 'https:') {
          const reason = `Refused to clone ${b.gitRepo}: the URL ${check.ok ? 'must use https://' : check.reason}`;
          return { state: 'failed', output: [err(reason)], reason };
        }
        return {
          state: 'running',
          output: [
            out(`Cloning ${b.gitRepo} (branch ${b.branch}, commit ${b.commit.slice(0, 7)})`),
            out(`Cloned ${files} files in ${n(1, 300, 1500)} ms`),
          ],
        };
      }
      case 1: {
        const names = b.environmentVariableNames;
        const packages = n(2, 300, 1500);
        return {
          state: 'running',
          output: [
            out(`Using Node.js ${b.nodeVersion} for a ${FRAMEWORK_NAMES[b.framework]} build`),
            ...(names.length > 0
              ? [
                  out(
                    `Injecting ${names.length} environment variable${names.length === 1 ? '' : 's'}: ` +
                      (names.length > 10 ? `${names.slice(0, 10).join(', ')}, …` : names.join(', ')),
                  ),
                ]
              : []),
            out('Running "npm install"'),
            out(`added ${packages} packages, and audited ${packages + 1} packages in ${n(3, 3, 40)}s`),
            out('found 0 vulnerabilities'),
          ],
        };
      }
      case 2: {
        const lines = [out(`Running build command: ${b.buildCommand}`)];
        if (b.buildCommand.includes('exit 1')) {
          const reason = `The build command exited with 1: ${b.buildCommand}`.slice(0, 500);
          return {
            state: 'failed',
            output: [...lines, err(`Error: Command "${b.buildCommand}" exited with 1`)],
            reason,
          };
        }
        return {
          state: 'running',
          output: [...lines, ...BUILD_OUTPUT[b.framework](h.toString('hex')).map(out)],
        };
      }
      case 3: {
        const dir = b.outputDirectory.replace(/\/+$/, '');
        return {
          state: 'running',
          output: [
            out(`Build output: ${dir}/ (${files} files, ${humanBytes(files * n(4, 2_000, 60_000))})`),
            out(`Uploading ${dir}/ to the edge network`),
            out(`Uploaded ${files} files`),
          ],
        };
      }
      default:
        return { state: 'succeeded', output: [out(`Deployment ready at ${b.url}`)] };
    }
  }
}
