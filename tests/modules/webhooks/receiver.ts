import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { verify as verifyGithubStyle } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body bytes, as received. */
  raw: Buffer;
  body: any;
  receivedAt: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long before answering. */
  delayMs?: number;
}

export type Responder = (req: ReceivedRequest, index: number) => Reply;

/** A webhook receiver on 127.0.0.1 that records every request and answers as told (200 by default). */
export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  respond(responder: Responder): void;
  /** Resolves once `predicate` holds over the requests received (rejects after `timeoutMs`). */
  waitFor(predicate: (reqs: ReceivedRequest[]) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** `port`: listen there (a receiver coming back after an outage); any free port by default. */
export async function startReceiver(path = '/hook', port = 0): Promise<Receiver> {
  let responder: Responder = () => ({ status: 200, body: 'ok' });
  const requests: ReceivedRequest[] = [];
  const waiters = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const r: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        raw,
        body,
        receivedAt: Date.now(),
      };
      const index = requests.length;
      requests.push(r);
      for (const w of waiters) w();
      const reply = responder(r, index);
      const send = () => {
        res.writeHead(reply.status, reply.headers ?? { 'content-type': 'text/plain' });
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const listening = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${listening}${path}`,
    requests,
    respond(r) {
      responder = r;
    },
    waitFor(predicate, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        if (predicate(requests)) return resolve(requests);
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`receiver: condition not met within ${timeoutMs} ms (${requests.length} requests)`),
          );
        }, timeoutMs);
        const check = () => {
          if (predicate(requests)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(requests);
          }
        };
        waiters.add(check);
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * What a receiver does with third-party libraries: `@octokit/webhooks-methods` checks `X-VPN-Signature` (keyed by
 * the whole secret), `standardwebhooks` checks the `webhook-*` headers (keyed by the bytes after `whsec_`, with its
 * replay window). Both must accept.
 */
export async function verifyWithThirdPartyLibraries(secret: string, req: ReceivedRequest): Promise<boolean> {
  const payload = req.raw.toString('utf8');
  const githubOk = await verifyGithubStyle(secret, payload, String(req.headers['x-vpn-signature'] ?? ''));
  if (!githubOk) return false;
  try {
    new StandardWebhook(secret).verify(payload, {
      'webhook-id': String(req.headers['webhook-id'] ?? ''),
      'webhook-timestamp': String(req.headers['webhook-timestamp'] ?? ''),
      'webhook-signature': String(req.headers['webhook-signature'] ?? ''),
    });
    return true;
  } catch {
    return false;
  }
}
