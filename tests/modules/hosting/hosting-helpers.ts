import nodeHttp from 'node:http';
import { expect } from 'chai';
import { Event } from '../../../server/events/event.entity.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import { http, type HttpResult } from '../../support/http.js';
import { waitFor } from '../../support/wait.js';

export const GIT_REPO = 'https://github.com/acme/web';

export function createSite(
  baseUrl: string,
  token: string,
  body: Record<string, unknown> = {},
): Promise<HttpResult> {
  return http(baseUrl, 'POST', '/v1/hosting/sites', {
    token,
    body: { name: 'Web', git_repo: GIT_REPO, framework: 'react', ...body },
  });
}

/** Creates a site (201 expected) and returns its detail view. */
export async function newSite(baseUrl: string, token: string, body: Record<string, unknown> = {}) {
  const res = await createSite(baseUrl, token, body);
  expect(res.status, res.text).to.equal(201);
  return res.body.site;
}

export function deploy(
  baseUrl: string,
  token: string,
  siteId: string,
  body: Record<string, unknown> = {},
): Promise<HttpResult> {
  return http(baseUrl, 'POST', `/v1/hosting/sites/${siteId}/deploy`, { token, body });
}

/** Deploys (202 expected) and returns the queued deployment. */
export async function newDeployment(
  baseUrl: string,
  token: string,
  siteId: string,
  body: Record<string, unknown> = {},
) {
  const res = await deploy(baseUrl, token, siteId, body);
  expect(res.status, res.text).to.equal(202);
  return res.body.deployment;
}

export async function getDeployment(baseUrl: string, token: string, siteId: string, id: string) {
  const res = await http(baseUrl, 'GET', `/v1/hosting/sites/${siteId}/deployments/${id}`, { token });
  expect(res.status, res.text).to.equal(200);
  return res.body.deployment;
}

/** Waits until the deployment reaches one of `statuses`, and returns it. */
export function waitForDeployment(
  baseUrl: string,
  token: string,
  siteId: string,
  id: string,
  statuses: string[] = ['success', 'failed', 'canceled'],
  timeoutMs = 20_000,
) {
  return waitFor(
    `the deployment to be ${statuses.join(' or ')}`,
    async () => {
      const d = await getDeployment(baseUrl, token, siteId, id);
      return statuses.includes(d.status) ? d : undefined;
    },
    { timeoutMs },
  );
}

export async function logsOf(baseUrl: string, token: string, siteId: string, id: string, query = '') {
  const res = await http(baseUrl, 'GET', `/v1/hosting/sites/${siteId}/deployments/${id}/logs${query}`, {
    token,
  });
  expect(res.status, res.text).to.equal(200);
  return res.body as { logs: any[]; has_more: boolean; status: string };
}

export async function eventsOf(deps: AppDeps, organizationId: string, type?: string): Promise<Event[]> {
  return deps.db.orm.em
    .fork()
    .find(Event, { organizationId, ...(type ? { type } : {}) }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function countSites(deps: AppDeps, organizationId: string): Promise<number> {
  return deps.db.orm.em.fork().count(HostingSite, { organization: organizationId });
}

/** One Server-Sent Event as a client parses it (comment lines are counted apart). */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
  /** performance.now() when it arrived. */
  at: number;
}

/** A raw HTTP client reading an event stream, as a third party would (no library). */
export interface SseClient {
  status: number;
  headers: nodeHttp.IncomingHttpHeaders;
  /** The body as received, for non-stream answers (errors). */
  text(): string;
  events: SseEvent[];
  comments: string[];
  /** Resolves once `predicate` holds over the events received. */
  waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  /** Resolves when the server ends the response. */
  ended: Promise<void>;
  /** Closes the connection from the client's side. */
  close(): void;
}

export function openSse(
  baseUrl: string,
  path: string,
  opts: { token?: string; headers?: Record<string, string> } = {},
): Promise<SseClient> {
  const url = new URL(path, baseUrl);
  return new Promise((resolve, reject) => {
    const req = nodeHttp.request(url, {
      method: 'GET',
      agent: false,
      headers: {
        accept: 'text/event-stream',
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        ...opts.headers,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      const waiters = new Set<() => void>();
      let raw = '';
      let buffer = '';
      let endResolve!: () => void;
      const ended = new Promise<void>((r) => (endResolve = r));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        raw += chunk;
        buffer += chunk;
        let idx: number;
        while ((idx = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, idx);
          buffer = buffer.slice(idx + 2);
          const e: SseEvent = { data: '', at: performance.now() };
          let isEvent = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) {
              comments.push(line);
              continue;
            }
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            isEvent = true;
            if (field === 'id') e.id = value;
            else if (field === 'event') e.event = value;
            else if (field === 'data') e.data = e.data ? `${e.data}\n${value}` : value;
          }
          if (isEvent) events.push(e);
        }
        for (const w of [...waiters]) w();
      });
      res.on('end', () => {
        endResolve();
        for (const w of [...waiters]) w();
      });
      res.on('close', () => endResolve());
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        text: () => raw,
        events,
        comments,
        ended,
        waitFor(predicate, timeoutMs = 15_000) {
          return new Promise((ok, fail) => {
            const check = () => {
              if (predicate(events)) {
                waiters.delete(check);
                clearTimeout(timer);
                ok(events);
              }
            };
            const timer = setTimeout(() => {
              waiters.delete(check);
              fail(new Error(`events not received within ${timeoutMs} ms: ${JSON.stringify(events)}`));
            }, timeoutMs);
            waiters.add(check);
            check();
          });
        },
        close: () => req.destroy(),
      });
    });
    req.end();
  });
}

/** The `log` events' data, parsed. */
export const logLines = (events: SseEvent[]) =>
  events.filter((e) => e.event === 'log').map((e) => JSON.parse(e.data) as { seq: number; message: string });
