import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface RawResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

/**
 * One request with exactly the given headers (fetch would add a Content-Type of its own to a string body).
 * `ca` trusts a self-signed certificate; `localAddress` picks the source address.
 */
export function rawRequest(
  url: string,
  opts: {
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    ca?: string | Buffer;
    servername?: string;
  } = {},
): Promise<RawResult> {
  const u = new URL(url);
  const send = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      u,
      {
        method: opts.method ?? 'GET',
        headers: opts.headers ?? {},
        ...(opts.ca ? { ca: opts.ca, servername: opts.servername } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
        });
      },
    );
    req.on('error', reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}
