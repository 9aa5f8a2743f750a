import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { posix } from 'node:path';
import fresh from 'fresh';
import mime from 'mime-types';
import send from 'send';
import type { AppDeps } from '../../kit/deps.js';
import type { ArtifactFile, ArtifactManifest, ArtifactStore } from './artifact-store.js';
import { SHORT_ID_LENGTH } from './hosting.constants.js';
import { recordEdgeTraffic } from './edge-traffic.js';

/**
 * The edge (docs/hosting.md, "The edge"): serves the artifacts of successful deployments by `Host`:
 * `<slug>.<SITES_DOMAIN>` and the site's custom domain → its live deployment, `<slug>-<short id>.<SITES_DOMAIN>` →
 * that deployment. Plain HTTP: TLS ends at the proxy or CDN in front (docs/deploying.md).
 *
 * Files are stored by content hash (artifact-store.ts), so a request path is resolved against the deployment's
 * manifest here, not against a directory: no path can leave the artifact, since only the manifest's paths exist.
 * The chosen content is then served by `send` (the static-file core of Express), which does the HTTP part: ranges,
 * `HEAD`, conditional requests against the ETag set here (the content's hash, so it is the same on every process
 * and changes exactly when the bytes do), and the length.
 */

/** Which deployment a host serves, remembered this long (a rollback in this process clears it at once). */
const ROUTE_TTL_MS = 1000;
const MAX_ROUTES = 10_000;
const MAX_MANIFESTS = 500;

export interface Route {
  siteId: string;
  deploymentId: string;
}

/** Names with a content hash in them (`app.3f9a1c2b.js`, `main-BX2k9aQf.css`): they never change, cache them long. */
const FINGERPRINTED =
  /[.-][0-9a-zA-Z_]{8,}\.(?:m?js|css|woff2?|ttf|otf|eot|png|jpe?g|gif|webp|avif|svg|ico|map|wasm)$/;

/** Which deployment each host served lately, in this process (`deps.modules.hosting.edgeRoutes`). */
export type EdgeRouteCache = Map<string, { route: Route | null; expires: number }>;

function routeCache(deps: AppDeps): EdgeRouteCache {
  return deps.modules.hosting.edgeRoutes;
}

/** Something changed which deployment a host serves (a rollback, a new live deployment, a deleted site). */
export function edgeRoutesChanged(deps: AppDeps): void {
  routeCache(deps).clear();
}

export class Edge {
  private readonly manifests = new Map<string, ArtifactManifest | null>();
  private server: http.Server | undefined;

  constructor(
    private readonly deps: AppDeps,
    private readonly store: ArtifactStore,
  ) {}

  async listen(port: number, host: string): Promise<AddressInfo> {
    const server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        this.deps.log.error({ err }, 'edge request failed');
        if (!res.headersSent) plain(res, 500, 'Internal error');
        else res.destroy();
      });
    });
    server.keepAliveTimeout = 65_000;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
  }

  /** The deployment a `Host` header names, or null. */
  async route(hostHeader: string | undefined): Promise<Route | null> {
    const host = (hostHeader ?? '').replace(/:\d+$/, '').replace(/\.$/, '').toLowerCase();
    if (!host || host.length > 253) return null;
    const cache = routeCache(this.deps);
    const hit = cache.get(host);
    const now = Date.now();
    if (hit && hit.expires > now) return hit.route;
    const route = await this.lookUp(host);
    if (cache.size >= MAX_ROUTES) cache.clear();
    cache.set(host, { route, expires: now + ROUTE_TTL_MS });
    return route;
  }

  private async lookUp(host: string): Promise<Route | null> {
    const repository = this.deps.modules.hosting.repository;
    const suffix = `.${this.deps.config.sitesDomain}`;
    if (!host.endsWith(suffix)) return repository.liveRoute('domain', host);
    const label = host.slice(0, -suffix.length);
    if (!/^[a-z0-9-]{1,63}$/.test(label)) return null;
    const preview = new RegExp(`^(.+)-([0-9a-z]{${SHORT_ID_LENGTH}})$`).exec(label);
    if (preview) {
      // A preview label is never a site's own (sites.service.ts keeps them apart).
      const route = await repository.previewRoute(preview[1]!, preview[2]!);
      if (route) return route;
    }
    return repository.liveRoute('slug', label);
  }

  private async manifest(deploymentId: string): Promise<ArtifactManifest | null> {
    if (this.manifests.has(deploymentId)) return this.manifests.get(deploymentId)!;
    const m = await this.store.manifest(deploymentId);
    // Artifacts never change once written; a missing one may appear (a build finishing), so it is not remembered.
    if (m) {
      if (this.manifests.size >= MAX_MANIFESTS) this.manifests.delete(this.manifests.keys().next().value!);
      this.manifests.set(deploymentId, m);
    }
    return m;
  }

  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      plain(res, 405, 'Method not allowed');
      return;
    }
    const route = await this.route(req.headers.host);
    const manifest = route && (await this.manifest(route.deploymentId));
    if (!route || !manifest) {
      plain(res, 404, 'Not found: no site is served at this address');
      return;
    }
    const url = new URL(req.url ?? '/', 'http://edge');
    let path: string;
    try {
      path = decodeURIComponent(url.pathname);
    } catch {
      plain(res, 400, 'Bad request');
      return;
    }
    if (path.includes('\0')) {
      plain(res, 400, 'Bad request');
      return;
    }
    // Normalised as a URL path; only the manifest's own paths can match, so nothing outside the artifact exists.
    path = posix.normalize(path.startsWith('/') ? path : `/${path}`);
    const file = manifest.files[path.endsWith('/') ? `${path}index.html` : path];
    const servedPath = path.endsWith('/') ? `${path}index.html` : path;
    if (!file && !path.endsWith('/') && manifest.files[`${path}/index.html`]) {
      res.statusCode = 301;
      res.setHeader('Location', `${url.pathname}/${url.search}`);
      res.end();
      this.count(route, res, 0);
      return;
    }
    if (!file) {
      const notFound = manifest.files['/404.html'];
      if (notFound) {
        const body = await readFile(this.store.contentPath(notFound.hash));
        res.statusCode = 404;
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.setHeader('Cache-Control', 'public, max-age=0, must-revalidate');
        res.setHeader('Content-Length', body.length);
        res.end(req.method === 'HEAD' ? undefined : body);
        this.count(route, res, req.method === 'HEAD' ? 0 : body.length);
        return;
      }
      plain(res, 404, 'Not found');
      this.count(route, res, 0);
      return;
    }
    const encoding = req.headers.range ? undefined : pickEncoding(req.headers['accept-encoding'], file);
    const etag = `"${file.hash.slice(0, 32)}${encoding ? `-${encoding}` : ''}"`;
    res.setHeader('ETag', etag);
    res.setHeader(
      'Cache-Control',
      FINGERPRINTED.test(servedPath)
        ? 'public, max-age=31536000, immutable'
        : 'public, max-age=0, must-revalidate',
    );
    if (file.encodings?.length) res.setHeader('Vary', 'Accept-Encoding');
    // A revalidation of what the client holds (its If-None-Match names this content's ETag): 304 from the manifest
    // alone, without opening the file (the ETag is the content's hash). `fresh` is the check `send` makes; ranges
    // and everything else go to `send`.
    if (req.headers['if-none-match'] && !req.headers.range && fresh(req.headers, { etag })) {
      res.statusCode = 304;
      res.end();
      this.count(route, res, 0);
      return;
    }
    res.setHeader('Content-Type', mime.contentType(posix.extname(servedPath)) || 'application/octet-stream');
    if (encoding) res.setHeader('Content-Encoding', encoding);
    const content = this.store.contentPath(file.hash, encoding);
    let sent = 0;
    const stream = send(req, content, {
      etag: false,
      lastModified: false,
      cacheControl: false,
      dotfiles: 'allow',
    });
    stream.on('error', (err: { status?: number }) => {
      plain(res, err.status ?? 500, err.status === 404 ? 'Not found' : 'Error');
    });
    stream.on('stream', (s: NodeJS.ReadableStream) => {
      s.on('data', (chunk: Buffer) => (sent += chunk.length));
    });
    res.on('finish', () => this.count(route, res, sent));
    stream.pipe(res);
  }

  private count(route: Route, _res: http.ServerResponse, bytes: number) {
    recordEdgeTraffic(this.deps, route.siteId, 1, bytes);
  }
}

function pickEncoding(accept: string | undefined, file: ArtifactFile): 'br' | 'gzip' | undefined {
  if (!accept || !file.encodings?.length) return undefined;
  const accepted = new Map<string, number>();
  for (const part of accept.toLowerCase().split(',')) {
    const [name, ...params] = part.trim().split(';');
    const q = params.map((p) => /^\s*q=([\d.]+)/.exec(p)?.[1]).find(Boolean);
    accepted.set(name!.trim(), q === undefined ? 1 : Number(q));
  }
  for (const e of ['br', 'gzip'] as const) {
    if (file.encodings.includes(e) && (accepted.get(e) ?? accepted.get('*') ?? 0) > 0) return e;
  }
  return undefined;
}

function plain(res: http.ServerResponse, status: number, message: string) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.end(`${message}\n`);
}
