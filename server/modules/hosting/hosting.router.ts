import { router } from '../../trpc/init.js';
import { requirePermission } from '../../trpc/procedures.js';
import {
  ZCancelDeploymentInput,
  ZCreateSiteInput,
  ZDeleteSiteOutput,
  ZDeployInput,
  ZDeploymentIdInput,
  ZDeploymentOutput,
  ZListDeploymentsInput,
  ZListDeploymentsOutput,
  ZListSitesInput,
  ZListSitesOutput,
  ZLogsInput,
  ZLogsOutput,
  ZRollbackInput,
  ZSiteIdInput,
  ZSiteOutput,
  ZUpdateSiteInput,
  ZVerifyDomainInput,
} from './hosting.schema.js';
import * as deployments from './deployments.service.js';
import * as sites from './sites.service.js';

const tags = ['Hosting'];

const siteProcedures = router({
  list: requirePermission('hosting:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/hosting/sites',
        tags,
        summary: 'List sites',
        description:
          'Newest first, paged. Owners and admins see every site of the organization (`user_id` narrows it to ' +
          'one user’s); members see their own.',
      },
    })
    .input(ZListSitesInput)
    .output(ZListSitesOutput)
    .query(({ ctx, input }) => sites.listSites(ctx, input)),

  create: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/hosting/sites',
        tags,
        summary: 'Create a site',
        description:
          'The site gets its address `https://<slug>.<SITES_DOMAIN>` (slug made from the name, unique) and ' +
          'framework defaults for `build_command` and `output_directory`. Nothing is built until ' +
          '`POST /hosting/sites/{id}/deploy`. A custom `domain` starts `pending` (`domain_verification` names the ' +
          'TXT record to publish) and is served once verified with `POST /hosting/sites/{id}/domain/verify`. ' +
          'Beyond the plan limit: 402 `PLAN_LIMIT_EXCEEDED`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED: 'The plan allows no more sites; details name `{resource, limit, current}`',
        CONFLICT: '`domain` is verified by another site',
      },
      successStatus: 201,
      location: '/hosting/sites/{site.id}',
    })
    .input(ZCreateSiteInput)
    .output(ZSiteOutput)
    .mutation(({ ctx, input }) => sites.createSite(ctx, input)),

  get: requirePermission('hosting:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/hosting/sites/{id}',
        tags,
        summary: 'A site (detail view)',
        description:
          'With its build settings, environment variables and simulated traffic of the last 24 hours.',
      },
    })
    .input(ZSiteIdInput)
    .output(ZSiteOutput)
    .query(({ ctx, input }) => sites.getSite(ctx, input)),

  update: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/hosting/sites/{id}',
        tags,
        summary: 'Change a site',
        description:
          'Fields given are changed; the others stay. `environment_variables` replaces the whole set. Changes ' +
          'apply to the next deployment. A new `domain` starts `pending` with a new TXT value, and is not served ' +
          'until verified.',
      },
      errors: { CONFLICT: '`domain` is verified by another site' },
    })
    .input(ZUpdateSiteInput)
    .output(ZSiteOutput)
    .mutation(({ ctx, input }) => sites.updateSite(ctx, input)),

  delete: requirePermission('hosting:delete')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/hosting/sites/{id}',
        tags,
        summary: 'Delete a site',
        description: 'Its deployments and logs go with it; its custom domain is free again at once.',
      },
    })
    .input(ZSiteIdInput)
    .output(ZDeleteSiteOutput)
    .mutation(({ ctx, input }) => sites.deleteSite(ctx, input)),

  verifyDomain: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/hosting/sites/{id}/domain/verify',
        tags,
        summary: "Verify a site's custom domain",
        description:
          'Looks up the TXT record `_cloud-platform.<domain>` (`domain_verification.record`); when one of its ' +
          'values is the site’s token, the domain becomes `verified` and the edge serves it. Pending claims of ' +
          'the same domain by other sites stay pending. A verified domain answers at once, unchanged.',
      },
      errors: {
        DOMAIN_NOT_VERIFIED:
          'No TXT record with the expected value was found (or the lookup failed); `details[0].record` is the ' +
          'record expected, `details[0].found` the values seen. Nothing changed.',
        CONFLICT: 'Another site verified the domain first, or the site has no custom domain',
      },
    })
    .input(ZVerifyDomainInput)
    .output(ZSiteOutput)
    .mutation(({ ctx, input }) => sites.verifyDomain(ctx, input)),

  deploy: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/hosting/sites/{id}/deploy',
        tags,
        summary: 'Deploy a site',
        description:
          'Queues a build (`queued`); the site builds one deployment at a time, oldest first: `building` at once ' +
          'for a real build (`BUILDER=local`), after the provisioning delay for a simulated one, then `success` ' +
          '(it becomes live; `hosting.deployment.succeeded`) or `failed` (`hosting.deployment.failed`). At most ' +
          '10 deployments of a site wait `queued`; one more is 409 `CONFLICT` (details ' +
          '`{resource: "queued_deployments", limit, current}`). Real builds of one organization run at most ' +
          '`BUILD_CONCURRENCY_PER_ORGANIZATION` at once (default 1); the others wait `queued`.',
      },
      errors: {
        CONFLICT:
          'The site already has 10 deployments waiting to build; details name `{resource: "queued_deployments", limit, current}`',
      },
      successStatus: 202,
    })
    .input(ZDeployInput)
    .output(ZDeploymentOutput)
    .mutation(({ ctx, input }) => deployments.deploy(ctx, input)),

  rollback: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/hosting/sites/{id}/rollback',
        tags,
        summary: 'Make an earlier deployment live again',
        description:
          'Without a build. `deployment_id` must be a `success` deployment of this site that is not live.',
      },
      errors: { CONFLICT: 'The deployment is not a success, or is already live' },
    })
    .input(ZRollbackInput)
    .output(ZSiteOutput)
    .mutation(({ ctx, input }) => deployments.rollback(ctx, input)),
});

const deploymentProcedures = router({
  list: requirePermission('hosting:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/hosting/sites/{id}/deployments',
        tags,
        summary: "List a site's deployments",
        description: 'Newest first, paged (`page`, `limit`), with `total`.',
      },
    })
    .input(ZListDeploymentsInput)
    .output(ZListDeploymentsOutput)
    .query(({ ctx, input }) => deployments.listDeployments(ctx, input)),

  get: requirePermission('hosting:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/hosting/sites/{id}/deployments/{deployment_id}',
        tags,
        summary: 'A deployment',
        description:
          'One deployment of the site: its status, branch, commit, timings and `duration`. Its build log is at ' +
          '`GET /hosting/sites/{id}/deployments/{deployment_id}/logs`.',
      },
    })
    .input(ZDeploymentIdInput)
    .output(ZDeploymentOutput)
    .query(({ ctx, input }) => deployments.getDeployment(ctx, input)),

  logs: requirePermission('hosting:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/hosting/sites/{id}/deployments/{deployment_id}/logs',
        tags,
        summary: "A deployment's build log",
        description:
          'Lines after `after`, at most `limit`. With `Accept: text/event-stream` the lines stream as ' +
          'Server-Sent Events as they are written (`id: <seq>`, `event: log`, the line as JSON `data`), resuming ' +
          'after `Last-Event-ID` (or `after`), and end with `event: end`, data `{"status": "<final status>"}`. ' +
          'Comment lines keep an idle stream open every 15 s.',
      },
      eventStream: true,
    })
    .input(ZLogsInput)
    .output(ZLogsOutput)
    .query(({ ctx, input }) => deployments.getLogs(ctx, input)),

  cancel: requirePermission('hosting:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/hosting/sites/{id}/deployments/{deployment_id}/cancel',
        tags,
        summary: 'Cancel a deployment',
        description:
          'A `queued` or `building` deployment becomes `canceled`; it writes nothing more and never goes live.',
      },
      errors: { CONFLICT: 'The deployment already succeeded, failed or was canceled' },
    })
    .input(ZCancelDeploymentInput)
    .output(ZDeploymentOutput)
    .mutation(({ ctx, input }) => deployments.cancelDeployment(ctx, input)),
});

export const hostingRouter = router({ sites: siteProcedures, deployments: deploymentProcedures });
