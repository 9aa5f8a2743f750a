import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
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

/** One response read off a raw connection; `headers` are lowercased. */
export interface RawResponse extends RawResult {
  headers: Record<string, string>;
}

/** Splits what a server wrote on a connection into its responses (bodies framed by Content-Length only). */
export function parseResponses(data: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = data;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) break;
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    const text = rest.subarray(end + 4, end + 4 + length).toString('utf8');
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, text, body });
    rest = rest.subarray(end + 4 + length);
  }
  return out;
}

/**
 * A raw TCP connection: writes exactly the bytes given (malformed requests included), collects everything the server
 * writes, and resolves once the server closes the connection (or after `timeoutMs`, closing it then).
 */
export function rawConnection(port: number, opts: { timeoutMs?: number } = {}) {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => {});
  const closed = new Promise<RawResponse[]>((resolve) => {
    const timer = setTimeout(() => socket.destroy(), opts.timeoutMs ?? 5_000);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseResponses(Buffer.concat(chunks)));
    });
  });
  return {
    write: (data: string | Buffer) => new Promise<void>((resolve) => socket.write(data, () => resolve())),
    /** Everything the server answered, once the connection is closed. */
    closed,
    /** Resolves when `count` responses were received (the connection may stay open). */
    async responses(count: number, timeoutMs = 5_000): Promise<RawResponse[]> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const parsed = parseResponses(Buffer.concat(chunks));
        if (parsed.length >= count || socket.destroyed || Date.now() > deadline) return parsed;
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    destroy: () => socket.destroy(),
  };
}

/** Sends `data` on a new connection and returns the one response to it (the server is expected to close). */
export async function rawExchange(port: number, data: string | Buffer): Promise<RawResponse> {
  const conn = rawConnection(port);
  await conn.write(data);
  const [res] = await conn.closed;
  if (!res) throw new Error('no response before the connection closed');
  return res;
}
