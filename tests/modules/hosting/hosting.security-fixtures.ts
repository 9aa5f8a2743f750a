import type { SecurityFixture } from '../../support/security-fixtures.js';
import type { TestServer } from '../../support/server.js';
import type { TestUser } from '../../support/factories.js';
import { GIT_REPO } from './hosting-helpers.js';

/**
 * Security-table fixtures of the hosting procedures that take an id (tests/support/security-fixtures.ts): each makes
 * a site (and a deployment where the path names one) as `other` and returns the complete input. The same fixtures
 * serve hosting.security.test.ts with `other` a member of the caller's own organization.
 */

async function siteOf(s: TestServer, other: TestUser): Promise<string> {
  const { site } = await s
    .caller(other.token)
    .hosting.sites.create({ name: 'Other site', git_repo: GIT_REPO, framework: 'vue' });
  return site.id;
}

async function deploymentOf(s: TestServer, other: TestUser): Promise<{ id: string; deployment_id: string }> {
  const id = await siteOf(s, other);
  const { deployment } = await s.caller(other.token).hosting.sites.deploy({ id });
  return { id, deployment_id: deployment.id };
}

const siteLabel = () => `d${Math.random().toString(36).slice(2, 10)}`;

export const hostingSecurityFixtures: Record<string, SecurityFixture> = {
  'hosting.sites.get': async ({ s, other }) => ({ id: await siteOf(s, other) }),
  'hosting.sites.update': async ({ s, other }) => ({ id: await siteOf(s, other), name: 'Renamed' }),
  'hosting.sites.delete': async ({ s, other }) => ({ id: await siteOf(s, other) }),
  'hosting.sites.verifyDomain': async ({ s, other }) => {
    const { site } = await s.caller(other.token).hosting.sites.create({
      name: 'Other domain',
      git_repo: GIT_REPO,
      framework: 'vue',
      domain: `${siteLabel()}.other.example`,
    });
    return { id: site.id };
  },
  'hosting.sites.deploy': async ({ s, other }) => ({ id: await siteOf(s, other), message: 'Not yours' }),
  'hosting.sites.rollback': async ({ s, other }) => deploymentOf(s, other),
  'hosting.deployments.list': async ({ s, other }) => ({ id: await siteOf(s, other) }),
  'hosting.deployments.get': async ({ s, other }) => deploymentOf(s, other),
  'hosting.deployments.logs': async ({ s, other }) => deploymentOf(s, other),
  'hosting.deployments.cancel': async ({ s, other }) => deploymentOf(s, other),
};
