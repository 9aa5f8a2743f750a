import type { BuildLogLine, PlatformClient, RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger, type Cli } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields, table, writeErr, writeOut } from '../output.js';

type CreateInput = RouterInputs['hosting']['sites']['create'];
type UpdateInput = RouterInputs['hosting']['sites']['update'];
type Deployment = RouterOutputs['hosting']['sites']['deploy']['deployment'];

interface CreateOptions {
  repo: string;
  framework: string;
  branch?: string;
  domain?: string;
  buildCommand?: string;
  outputDirectory?: string;
  nodeVersion?: string;
  env: string[];
}

interface DeployOptions {
  branch?: string;
  message?: string;
  commit?: string;
  follow?: boolean;
  wait?: boolean;
  timeout?: number;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** `--env KEY=VALUE` options as the API's object. */
function environmentOf(pairs: string[]): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(`--env wants KEY=VALUE, got ${pair}`, EXIT.USAGE);
    environment[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return environment;
}

interface UpdateOptions {
  name?: string;
  repo?: string;
  framework?: string;
  branch?: string;
  /** false with --no-domain */
  domain?: string | false;
  buildCommand?: string;
  outputDirectory?: string;
  nodeVersion?: string;
  env: string[];
  clearEnv?: boolean;
}

const logLine = (line: BuildLogLine) => `${line.timestamp.slice(11, 19)}  ${line.message}`;

function deploymentFields(d: Deployment): string {
  return fields({
    deployment: d.id,
    site: d.site_id,
    status: d.status,
    message: d.status_message,
    branch: d.branch,
    commit: d.commit.slice(0, 7),
    url: d.url,
    live: d.live ? 'yes' : 'no',
    duration: d.duration,
  });
}

/**
 * Prints the build log as it is written (the SDK's followDeploymentLogs), then the deployment. Exit 1 unless the
 * build succeeded.
 */
async function follow(cli: Cli, client: PlatformClient, siteId: string, deploymentId: string): Promise<void> {
  const lines: BuildLogLine[] = [];
  const stream = client.followDeploymentLogs(siteId, deploymentId);
  for await (const line of stream) {
    if (cli.json) lines.push(line);
    else (line.stream === 'stderr' ? writeErr : writeOut)(`${logLine(line)}\n`);
  }
  const { deployment } = await client.hosting.deployments.get.query({
    id: siteId,
    deployment_id: deploymentId,
  });
  cli.print({ deployment, logs: lines }, () => `\n${deploymentFields(deployment)}`);
  if (deployment.status !== 'success') {
    throw new CliError(`deployment ${deployment.id} ended ${deployment.status}`, EXIT.FAILURE);
  }
}

export default defineCommandGroup({
  name: 'sites',
  register(program, cli) {
    const sites = program.command('sites').description('hosted static sites and their deployments');

    documented(sites.command('list'), {
      calls: ['hostingSitesList'],
      examples: ['cloud sites list'],
    })
      .description('list your sites')
      .action(async () => {
        const res = await cli.client().hosting.sites.list.query({});
        cli.print(res, () =>
          table(res.sites, {
            id: (s) => s.id,
            name: (s) => s.name,
            framework: (s) => s.framework,
            url: (s) => s.url,
            'live deployment': (s) => s.live_deployment_id,
          }),
        );
      });

    documented(sites.command('create'), {
      calls: ['hostingSitesCreate'],
      examples: [
        'cloud sites create blog --repo https://github.com/acme/blog --framework react --env API_URL=https://api.acme.dev',
      ],
    })
      .description('create a site built from a Git repository')
      .argument('<name>', 'the site name')
      .requiredOption('--repo <url>', 'the Git repository (https://…)')
      .requiredOption('--framework <framework>', 'react, nextjs, vue or angular')
      .option('--branch <branch>', 'the branch to build (default main)')
      .option('--domain <domain>', 'a custom domain')
      .option('--build-command <command>', 'the build command')
      .option('--output-directory <dir>', 'the directory the build writes')
      .option('--node-version <version>', '18, 20 or 22')
      .option('--env <KEY=VALUE>', 'an environment variable of the build (repeatable)', collect, [])
      .action(async (name: string, o: CreateOptions) => {
        const environment = environmentOf(o.env);
        const res = await cli.client().hosting.sites.create.mutate({
          name,
          git_repo: o.repo,
          framework: o.framework as CreateInput['framework'],
          ...(o.branch ? { branch: o.branch } : {}),
          ...(o.domain ? { domain: o.domain } : {}),
          ...(o.buildCommand ? { build_command: o.buildCommand } : {}),
          ...(o.outputDirectory ? { output_directory: o.outputDirectory } : {}),
          ...(o.nodeVersion ? { node_version: o.nodeVersion as CreateInput['node_version'] } : {}),
          ...(o.env.length > 0 ? { environment_variables: environment } : {}),
        });
        cli.print(res, () => fields({ id: res.site.id, name: res.site.name, url: res.site.url }));
      });

    documented(sites.command('show'), {
      calls: ['hostingSitesGet'],
      examples: ['cloud sites show site_abc123'],
    })
      .description('show a site')
      .argument('<site>', 'the site id')
      .action(async (id: string) => {
        const res = await cli.client().hosting.sites.get.query({ id });
        const s = res.site;
        cli.print(res, () =>
          fields({
            id: s.id,
            name: s.name,
            url: s.url,
            domain: s.domain,
            'domain status': s.domain_verification
              ? `${s.domain_verification.status} (TXT ${s.domain_verification.record.name} = ${s.domain_verification.record.value})`
              : null,
            repository: `${s.git_repo} (${s.branch})`,
            framework: s.framework,
            'live deployment': s.live_deployment_id,
            'last deployment': s.last_deployment,
            'requests 24h': s.metrics.requests_24h,
          }),
        );
      });

    documented(sites.command('deploy'), {
      calls: ['hostingSitesDeploy', 'hostingDeploymentsGet', 'hostingDeploymentsLogs'],
      examples: [
        'cloud sites deploy site_abc123 --follow',
        'cloud sites deploy site_abc123 --branch release --wait',
      ],
    })
      .description('start a build of the site; --follow prints its log live until it ends')
      .argument('<site>', 'the site id')
      .option('--branch <branch>', 'the branch (default: the site’s)')
      .option('--message <message>', 'a note for the deployment')
      .option('--commit <sha>', 'the commit (default: the branch head)')
      .option('--follow', 'print the build log as it is written; exit 1 unless the build succeeds')
      .option('--wait', 'wait for the build to end without printing its log; exit 1 unless it succeeds')
      .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600)
      .action(async (siteId: string, o: DeployOptions) => {
        const client = cli.client();
        const res = await client.hosting.sites.deploy.mutate({
          id: siteId,
          ...(o.branch ? { branch: o.branch } : {}),
          ...(o.message ? { message: o.message } : {}),
          ...(o.commit ? { commit: o.commit } : {}),
        });
        const d = res.deployment;
        if (o.follow) {
          if (!cli.json) cli.note(`Deployment ${d.id} queued; following its build log.`);
          await follow(cli, client, siteId, d.id);
          return;
        }
        if (o.wait) {
          const final = await cli.waitFor({
            poll: () => client.hosting.deployments.get.query({ id: siteId, deployment_id: d.id }),
            describe: (s) => `deployment ${d.id} is ${s.deployment.status}`,
            done: (s) => !['queued', 'building'].includes(s.deployment.status),
            timeoutSeconds: o.timeout,
          });
          cli.print(final, () => deploymentFields(final.deployment));
          if (final.deployment.status !== 'success') {
            throw new CliError(`deployment ${d.id} ended ${final.deployment.status}`, EXIT.FAILURE);
          }
          return;
        }
        cli.print(
          res,
          () => `${deploymentFields(d)}\nFollow it with: cloud sites logs ${siteId} ${d.id} --follow`,
        );
      });

    documented(sites.command('logs'), {
      calls: ['hostingDeploymentsLogs', 'hostingDeploymentsGet'],
      examples: ['cloud sites logs site_abc123 dep_abc123 --follow'],
    })
      .description('print a deployment’s build log (--follow: live, until the build ends)')
      .argument('<site>', 'the site id')
      .argument('<deployment>', 'the deployment id')
      .option('--follow', 'keep printing lines as they are written; exit 1 unless the build succeeds')
      .action(async (siteId: string, deploymentId: string, o: { follow?: boolean }) => {
        const client = cli.client();
        if (o.follow) return follow(cli, client, siteId, deploymentId);
        const res = await client.hosting.deployments.logs.query({ id: siteId, deployment_id: deploymentId });
        cli.print(res, () => [...res.logs.map(logLine), `(${res.status})`].join('\n'));
      });

    documented(sites.command('deployments'), {
      calls: ['hostingDeploymentsList'],
      examples: ['cloud sites deployments site_abc123'],
    })
      .description('list a site’s deployments, newest first')
      .argument('<site>', 'the site id')
      .action(async (siteId: string) => {
        const res = await cli.client().hosting.deployments.list.query({ id: siteId });
        cli.print(res, () =>
          table(res.deployments, {
            id: (d) => d.id,
            status: (d) => d.status,
            live: (d) => (d.live ? 'yes' : ''),
            branch: (d) => d.branch,
            commit: (d) => d.commit.slice(0, 7),
            created: (d) => d.created_at,
            duration: (d) => d.duration,
          }),
        );
      });

    documented(sites.command('rollback'), {
      calls: ['hostingSitesRollback'],
      examples: ['cloud sites rollback site_abc123 dep_abc123'],
    })
      .description('make an earlier successful deployment live again (no build)')
      .argument('<site>', 'the site id')
      .argument('<deployment>', 'the deployment to make live')
      .action(async (siteId: string, deploymentId: string) => {
        const res = await cli
          .client()
          .hosting.sites.rollback.mutate({ id: siteId, deployment_id: deploymentId });
        cli.print(res, () => `${res.site.name} now serves deployment ${res.site.live_deployment_id}.`);
      });

    documented(sites.command('verify-domain'), {
      calls: ['hostingSitesVerifyDomain'],
      examples: ['cloud sites verify-domain site_abc123'],
    })
      .description("verify the site's custom domain by its TXT record (then the edge serves it)")
      .argument('<site>', 'the site id')
      .action(async (id: string) => {
        const res = await cli.client().hosting.sites.verifyDomain.mutate({ id });
        cli.print(res, () => `${res.site.domain} is verified: it is served by ${res.site.name}.`);
      });

    documented(sites.command('cancel'), {
      calls: ['hostingDeploymentsCancel'],
      examples: ['cloud sites cancel site_abc123 dep_abc123'],
    })
      .description('cancel a queued or building deployment')
      .argument('<site>', 'the site id')
      .argument('<deployment>', 'the deployment id')
      .action(async (siteId: string, deploymentId: string) => {
        const res = await cli
          .client()
          .hosting.deployments.cancel.mutate({ id: siteId, deployment_id: deploymentId });
        cli.print(res, () => deploymentFields(res.deployment));
      });

    documented(sites.command('delete'), {
      calls: ['hostingSitesDelete'],
      examples: ['cloud sites delete site_abc123'],
    })
      .description('delete a site and its deployments')
      .argument('<site>', 'the site id')
      .action(async (id: string) => {
        const res = await cli.client().hosting.sites.delete.mutate({ id });
        cli.print(res, () => `Deleted ${id}.`);
      });

    documented(sites.command('update'), {
      calls: ['hostingSitesUpdate'],
      examples: [
        'cloud sites update site_abc123 --branch release --node-version 22',
        'cloud sites update site_abc123 --domain www.acme.dev',
        'cloud sites update site_abc123 --env API_URL=https://api.acme.dev --env MODE=prod',
      ],
    })
      .description('change a site’s settings; the next deployment builds with them')
      .argument('<site>', 'the site id')
      .option('--name <name>', 'a new display name (the address stays the same)')
      .option('--repo <url>', 'another Git repository')
      .option('--framework <framework>', 'react, nextjs, vue or angular')
      .option('--branch <branch>', 'the branch deployed by default')
      .option('--domain <domain>', 'a custom domain')
      .option('--no-domain', 'remove the custom domain')
      .option('--build-command <command>', 'the build command')
      .option('--output-directory <dir>', 'the directory the build writes')
      .option('--node-version <version>', '18, 20 or 22')
      .option('--env <KEY=VALUE>', 'replaces every variable of the site by these (repeatable)', collect, [])
      .option('--clear-env', 'remove every environment variable')
      .action(async (id: string, o: UpdateOptions) => {
        const input: UpdateInput = {
          id,
          ...(o.name ? { name: o.name } : {}),
          ...(o.repo ? { git_repo: o.repo } : {}),
          ...(o.framework ? { framework: o.framework as UpdateInput['framework'] } : {}),
          ...(o.branch ? { branch: o.branch } : {}),
          ...(o.domain === false ? { domain: null } : o.domain ? { domain: o.domain } : {}),
          ...(o.buildCommand ? { build_command: o.buildCommand } : {}),
          ...(o.outputDirectory ? { output_directory: o.outputDirectory } : {}),
          ...(o.nodeVersion ? { node_version: o.nodeVersion as UpdateInput['node_version'] } : {}),
          ...(o.env.length > 0 ? { environment_variables: environmentOf(o.env) } : {}),
          ...(o.clearEnv ? { environment_variables: {} } : {}),
        };
        if (Object.keys(input).length === 1) {
          throw new CliError('nothing to change: give at least one option (see --help)', EXIT.USAGE);
        }
        const res = await cli.client().hosting.sites.update.mutate(input);
        const site = res.site;
        cli.print(res, () =>
          fields({
            id: site.id,
            name: site.name,
            url: site.url,
            domain: site.domain,
            repository: `${site.git_repo} (${site.branch})`,
            framework: site.framework,
          }),
        );
      });

    documented(sites.command('deployment'), {
      calls: ['hostingDeploymentsGet'],
      examples: ['cloud sites deployment site_abc123 dep_abc123'],
    })
      .description('show one deployment: status, commit, address, duration')
      .argument('<site>', 'the site id')
      .argument('<deployment>', 'the deployment id')
      .action(async (siteId: string, deploymentId: string) => {
        const res = await cli
          .client()
          .hosting.deployments.get.query({ id: siteId, deployment_id: deploymentId });
        cli.print(res, () => deploymentFields(res.deployment));
      });
  },
});
