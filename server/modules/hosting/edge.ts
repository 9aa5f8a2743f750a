import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { createReadStream } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { posix } from 'node:path';
import fresh from 'fresh';
import mime from 'mime-types';
import send from 'send';
import type { AppDeps } from '../../kit/deps.js';
import type { ArtifactFile, ArtifactManifest, ArtifactStore } from './artifact-store.js';
import { SHORT_ID_LENGTH } from './hosting.constants.js';
import { domainProblem } from './hosting.schema.js';
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
/**
 * A host that serves nothing, remembered this long: a flood of requests for unknown hosts costs one query per host
 * and period, not one per request. A change in this process (a site created, changed, deleted, a domain verified,
 * something going live) clears it at once; in other processes a host starts being served within this time.
 */
export const UNKNOWN_HOST_TTL_MS = 5000;
/** Hosts remembered at most (known and unknown together); the oldest go first. */
const MAX_ROUTES = 10_000;
const MAX_MANIFESTS = 500;
/** Files of all the manifests kept in memory together (an artifact has at most 20,000: artifact-store.ts). */
const MAX_MANIFEST_FILES = 200_000;

export interface Route {
  siteId: string;
  deploymentId: string;
}

/** Names with a content hash in them (`app.3f9a1c2b.js`, `main-BX2k9aQf.css`): they never change, cache them long. */
const FINGERPRINTED =
  /[.-][0-9a-zA-Z_]{8,}\.(?:m?js|css|woff2?|ttf|otf|eot|png|jpe?g|gif|webp|avif|svg|ico|map|wasm)$/;

/** Which deployment each host served lately, in this process (`runtimeOf(deps, 'hosting').edgeRoutes`). */
export type EdgeRouteCache = Map<string, { route: Route | null; expires: number }>;

function routeCache(deps: AppDeps): EdgeRouteCache {
  return runtimeOf(deps, 'hosting').edgeRoutes;
}

/** How many times each cache was cleared: a lookup that began before a clear is not remembered after it. */
const cacheEpochs = new WeakMap<EdgeRouteCache, number>();

/**
 * Something changed which deployment a host serves (a rollback, a new live deployment, a site created, changed or
 * deleted, a domain verified).
 */
export function edgeRoutesChanged(deps: AppDeps): void {
  const cache = routeCache(deps);
  cache.clear();
  cacheEpochs.set(cache, (cacheEpochs.get(cache) ?? 0) + 1);
}

export class Edge {
  private readonly manifests = new Map<string, ArtifactManifest | null>();
  /** Lookups under way, by host: concurrent requests for one host share one query. */
  private readonly lookups = new Map<string, { epoch: number; route: Promise<Route | null> }>();
  private manifestFiles = 0;
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
    if (hit && hit.expires > Date.now()) return hit.route;
    const epoch = cacheEpochs.get(cache) ?? 0;
    let lookup = this.lookups.get(host);
    if (!lookup || lookup.epoch !== epoch) {
      const started = {
        epoch,
        route: this.lookUp(host).finally(() => {
          if (this.lookups.get(host) === started) this.lookups.delete(host);
        }),
      };
      this.lookups.set(host, started);
      lookup = started;
    }
    const route = await lookup.route;
    // Remembered unless the routes changed meanwhile (what was read may be from before the change).
    if ((cacheEpochs.get(cache) ?? 0) === epoch) {
      cache.delete(host);
      while (cache.size >= MAX_ROUTES) cache.delete(cache.keys().next().value!);
      cache.set(host, { route, expires: Date.now() + (route ? ROUTE_TTL_MS : UNKNOWN_HOST_TTL_MS) });
    }
    return route;
  }

  private async lookUp(host: string): Promise<Route | null> {
    const repository = repositoryOf(this.deps, 'hosting');
    const suffix = `.${this.deps.config.sitesDomain}`;
    if (!host.endsWith(suffix)) {
      // Only a host name a site could have as its domain is looked up (not an address, not a malformed name).
      if (domainProblem(host)) return null;
      return repository.liveRoute('domain', host);
    }
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
      const files = Object.keys(m.files).length;
      // Oldest first, until both the count and the files kept fit.
      while (
        this.manifests.size > 0 &&
        (this.manifests.size >= MAX_MANIFESTS || this.manifestFiles + files > MAX_MANIFEST_FILES)
      ) {
        const [oldest, old] = this.manifests.entries().next().value!;
        this.manifests.delete(oldest);
        this.manifestFiles -= old ? Object.keys(old.files).length : 0;
      }
      this.manifests.set(deploymentId, m);
      this.manifestFiles += files;
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
    const target = requestTarget(req.url);
    let path: string;
    try {
      path = decodeURIComponent(target.pathname);
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
      // Built from the path that matched, never from what the client sent: relative, one leading slash.
      res.setHeader('Location', `${encodePath(path)}/${target.search}`);
      res.end();
      this.count(route, res, 0);
      return;
    }
    if (!file) {
      const notFound = manifest.files['/404.html'];
      if (notFound) {
        this.sendNotFoundPage(req, res, route, notFound);
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

  /**
   * The site's own 404 page, streamed from the store like any file (never read whole: many 404s of a large page at
   * once cost a buffer each, not the page each).
   */
  private sendNotFoundPage(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    route: Route,
    page: ArtifactFile,
  ): void {
    res.statusCode = 404;
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=0, must-revalidate');
    res.setHeader('Content-Length', page.size);
    if (req.method === 'HEAD') {
      res.end();
      this.count(route, res, 0);
      return;
    }
    let sent = 0;
    const stream = createReadStream(this.store.contentPath(page.hash));
    stream.on('data', (chunk) => (sent += chunk.length));
    stream.on('error', (err) => {
      this.deps.log.error({ err }, 'edge could not read a 404 page');
      if (!res.headersSent) plain(res, 500, 'Error');
      else res.destroy();
    });
    res.on('close', () => stream.destroy());
    res.on('finish', () => this.count(route, res, sent));
    stream.pipe(res);
  }

  private count(route: Route, _res: http.ServerResponse, bytes: number) {
    recordEdgeTraffic(this.deps, route.siteId, 1, bytes);
  }
}

/**
 * The path and query of a request target as sent (`/a//b?x`). Not through `new URL(…, base)`, which would read
 * `//evil.example/x` as another host and drop `.` segments before the path is decoded.
 */
function requestTarget(raw: string | undefined): { pathname: string; search: string } {
  let target = raw || '/';
  // The absolute form (`GET http://host/path`): its path only.
  if (/^https?:\/\//i.test(target)) {
    try {
      const u = new URL(target);
      target = `${u.pathname}${u.search}`;
    } catch {
      target = '/';
    }
  }
  const q = target.indexOf('?');
  const pathname = q < 0 ? target : target.slice(0, q);
  const search = q < 0 ? '' : target.slice(q).replace(/[^\x21-\x7e]/g, encodeURIComponent);
  return { pathname: pathname.startsWith('/') ? pathname : `/${pathname}`, search };
}

/**
 * A normalised path (`/docs`) as a URL path, every segment percent-encoded: a redirect to it is relative and starts
 * with exactly one `/`, since a segment is never empty and `\` (which browsers read as `/`) is encoded.
 */
function encodePath(path: string): string {
  const encoded = path
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => encodeURIComponent(segment))
    .join('/');
  return `/${encoded}`;
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
