import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import nodeHttp from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { AppDeps } from '../../../server/kit/deps.js';
import { newId } from '../../../server/lib/ids.js';
import { edgeRoutesChanged } from '../../../server/modules/hosting/edge.js';
import { HostingDeployment } from '../../../server/modules/hosting/hosting-deployment.entity.js';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import { newDeploymentFields } from '../../../server/modules/hosting/hosting.repository.js';

/**
 * A site served by the edge without a build: `files` are stored as the artifact of a new `success` deployment of the
 * site, made its live one (what a real build ends with, builds.service.ts). Returns the deployment's id.
 */
export async function serveFiles(
  deps: AppDeps,
  siteId: string,
  files: Record<string, string | Buffer>,
): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'edge-site-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  const id = newId('dep');
  await deps.modules.hosting.artifacts.put(id, dir);
  await goLive(deps, siteId, id);
  return id;
}

/** Makes a new `success` deployment `id` (whose artifact is already stored) the live one of the site. */
export async function goLive(deps: AppDeps, siteId: string, id: string): Promise<void> {
  const em = deps.db.orm.em.fork();
  const site = await em.findOneOrFail(HostingSite, siteId);
  const now = new Date();
  em.create(HostingDeployment, {
    ...newDeploymentFields({
      id,
      site,
      now,
      branch: 'main',
      commit: 'a'.repeat(40),
      commitPinned: false,
      builder: 'local',
      message: null,
    }),
    status: 'success',
    startedAt: now,
    completedAt: now,
  });
  site.liveDeploymentId = id;
  site.liveDeploymentAt = now;
  site.previewDeploymentId = id;
  site.liveSince ??= now;
  await em.flush();
  edgeRoutesChanged(deps);
}

export interface EdgeAnswer {
  status: number;
  headers: nodeHttp.IncomingHttpHeaders;
  body: Buffer;
}

/** One request to the edge with the path exactly as given (no normalisation by a client library) and a `Host`. */
export function edgeRequest(
  port: number,
  host: string,
  path = '/',
  opts: { method?: string; headers?: Record<string, string> } = {},
): Promise<EdgeAnswer> {
  return new Promise((resolve, reject) => {
    const req = nodeHttp.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: opts.method ?? 'GET',
        agent: false,
        headers: { host, ...opts.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
