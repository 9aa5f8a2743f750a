// Test tier: server
import { expect } from 'chai';
// By path: the sources of this checkout, whatever the workspace link resolves to.
import { createClient, NotFoundError, type BuildLogLine } from '../../client-sdk/src/index.js';
import { createOrg } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';
import { appRouter } from '../../server/router.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { createCallerFactory } from '../../server/trpc/init.js';

describe('client SDK: following a build log', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** A site and a deployment that builds at `paceMs` (its steps a quarter of that apart). */
  async function building(token: string, paceMs = 1200) {
    const deps = { ...s.deps, config: { ...s.deps.config, provisioningDelayMs: paceMs } };
    const caller = createCallerFactory(appRouter)(createInProcessContext(deps, { token }));
    const { site } = await caller.hosting.sites.create({
      name: 'SDK',
      git_repo: 'https://github.com/acme/sdk',
      framework: 'react',
    });
    const { deployment } = await caller.hosting.sites.deploy({ id: site.id });
    return { siteId: site.id, deploymentId: deployment.id };
  }

  async function collect(iterable: AsyncIterable<BuildLogLine>): Promise<BuildLogLine[]> {
    const out: BuildLogLine[] = [];
    for await (const line of iterable) out.push(line);
    return out;
  }

  it('yields every line as it is written, then ends with the final status', async () => {
    const owner = await createOrg(s.deps);
    const client = createClient({ baseUrl: `${s.baseUrl}/v1`, token: owner.token });
    const { siteId, deploymentId } = await building(owner.token);
    const stream = client.followDeploymentLogs(siteId, deploymentId);
    expect(stream.status).to.equal(undefined);
    const lines = await collect(stream);
    expect(stream.status).to.equal('success');
    const stored = await client.hosting.deployments.logs.query({ id: siteId, deployment_id: deploymentId });
    expect(lines).to.deep.equal(stored.logs);

    const tail = await collect(
      client.followDeploymentLogs(siteId, deploymentId, { after: lines.length - 2 }),
    );
    expect(tail).to.deep.equal(lines.slice(-2));
  });

  it('picks up where it stopped when the connection drops', async () => {
    const owner = await createOrg(s.deps);
    const calls: Record<string, string>[] = [];
    // The first connection is cut after three events, as a proxy might.
    const fetch = async (url: string, init: RequestInit) => {
      calls.push({ ...(init.headers as Record<string, string>) });
      const res = await globalThis.fetch(url, init);
      if (calls.length > 1) return res;
      const reader = res.body!.getReader();
      let seen = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          controller.enqueue(value);
          seen += new TextDecoder().decode(value).split('\n\n').length - 1;
          if (seen >= 3) {
            await reader.cancel();
            controller.close();
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token, fetch });
    const { siteId, deploymentId } = await building(owner.token);
    const stream = client.followDeploymentLogs(siteId, deploymentId, { reconnectDelayMs: 50 });
    const lines = await collect(stream);
    expect(stream.status).to.equal('success');
    expect(lines.map((l) => l.seq)).to.deep.equal(lines.map((_, i) => i + 1));
    expect(calls.length).to.equal(2);
    expect(calls[1]!['last-event-id']).to.match(/^\d+$/);
  });

  it('rejects with the API error class (404), and stops quietly when aborted', async () => {
    const owner = await createOrg(s.deps);
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
    const { siteId, deploymentId } = await building(owner.token, 8000);
    const err = await rejection(collect(client.followDeploymentLogs(siteId, 'dep_unknown00000000000000')));
    expect(err).to.be.instanceOf(NotFoundError);
    expect((err as NotFoundError).status).to.equal(404);

    const abort = new AbortController();
    const seen: BuildLogLine[] = [];
    const stream = client.followDeploymentLogs(siteId, deploymentId, { signal: abort.signal });
    setTimeout(() => abort.abort(), 300);
    for await (const line of stream) seen.push(line);
    expect(stream.status).to.equal(undefined);
    await client.hosting.deployments.cancel.mutate({ id: siteId, deployment_id: deploymentId });
  });
});
