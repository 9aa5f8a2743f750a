import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CliError, EXIT } from './exit-codes.js';

/**
 * `cloud login --sso <email>` (docs/cli.md, "Signing in"): a listener on 127.0.0.1 only, on a port the system picks,
 * takes the browser back from the identity provider. The API sends it to `return_to` (this listener's
 * `/callback?state=…`) with `?code=` once signed in, or `?error=&error_description=`; the listener answers a small
 * page, stops at the first answer that carries its own `state` (another page of the machine cannot hand it a code of
 * someone else's account without it) and the code is exchanged for the session.
 */

/** What came back to the listener. */
export type SsoCallback = { code: string } | { error: string; description: string };

/** The listener of one sign-in: where the API sends the browser, and what came back. */
export interface SsoListener {
  /** `http://127.0.0.1:<port>/callback?state=<random>`: the `return_to` of `POST /auth/sso/start`. */
  readonly returnTo: string;
  /** The code or the error the browser brought, once; rejects after `timeoutMs` (exit 1). */
  readonly result: Promise<SsoCallback>;
  close(): void;
}

const CALLBACK_PATH = '/callback';

const PAGE_STYLE =
  'body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;line-height:1.5}';

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

function answer(res: ServerResponse, status: number, title: string, text: string): void {
  const body =
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
    `<style>${PAGE_STYLE}</style></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(text)}</p></body></html>\n`;
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    connection: 'close',
  });
  res.end(body);
}

/** Starts the listener on 127.0.0.1 (never another interface), on an ephemeral port. */
export async function listenForSsoCallback(timeoutMs: number): Promise<SsoListener> {
  const state = randomBytes(24).toString('base64url');
  let settle: (value: SsoCallback | Error) => void = () => undefined;
  const settled = new Promise<SsoCallback | Error>((resolve) => (settle = resolve));

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method !== 'GET' || url.pathname !== CALLBACK_PATH) {
      answer(res, 404, 'Not found', 'This address only takes the browser back from a sign-in.');
      return;
    }
    if (url.searchParams.get('state') !== state) {
      answer(res, 400, 'Not this sign-in', 'This answer is not for the sign-in the command is waiting for.');
      return;
    }
    const code = url.searchParams.get('code');
    const error = url.searchParams.get('error');
    if (code) {
      answer(res, 200, 'Signed in', 'You are signed in to the cloud command. You can close this tab.');
      settle({ code });
    } else if (error) {
      const description = url.searchParams.get('error_description') ?? '';
      answer(res, 400, 'Sign-in refused', `${error}${description ? `: ${description}` : ''}`);
      settle({ error, description });
    } else {
      answer(res, 400, 'No code', 'The answer carried neither a code nor an error.');
    }
  });
  // Every answer says `connection: close`, and closing the listener ends any connection left.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0 }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  const timer = setTimeout(
    () =>
      settle(
        new CliError(
          `gave up waiting for the browser after ${Math.round(timeoutMs / 1000)}s: run \`cloud login --sso\` again`,
          EXIT.FAILURE,
        ),
      ),
    timeoutMs,
  );
  const close = () => {
    clearTimeout(timer);
    server.close();
    server.closeAllConnections();
  };
  const result = settled.then((value) => {
    close();
    if (value instanceof Error) throw value;
    return value;
  });
  // A wait that ends while nobody awaits it yet (the start of the sign-in still running) is not an unhandled failure.
  result.catch(() => undefined);
  return {
    returnTo: `http://127.0.0.1:${port}${CALLBACK_PATH}?state=${state}`,
    result,
    close,
  };
}

/**
 * The program that opens an address in the browser: `BROWSER` when set (a program, given the address as its one
 * argument), else the platform's own (`open` on macOS, `xdg-open` elsewhere on Unix, the URL handler on Windows).
 */
function opener(env: NodeJS.ProcessEnv, url: string): { command: string; args: string[] } {
  if (env.BROWSER) return { command: env.BROWSER, args: [url] };
  if (process.platform === 'darwin') return { command: 'open', args: [url] };
  if (process.platform === 'win32')
    return { command: 'rundll32', args: ['url.dll,FileProtocolHandler', url] };
  return { command: 'xdg-open', args: [url] };
}

/**
 * Opens `url` in the browser; false when there is no opener or it failed at once (then the caller prints the
 * address). The opener is not waited for beyond its start: a browser may run for long.
 */
export function openBrowser(url: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const { command, args } = opener(env, url);
  return new Promise((resolve) => {
    let child;
    try {
      // No shell: the address is one argument, whatever it holds.
      child = spawn(command, args, { stdio: 'ignore', detached: true, shell: false });
    } catch {
      resolve(false);
      return;
    }
    const started = setTimeout(() => {
      child.unref();
      resolve(true);
    }, 1000);
    child.once('error', () => {
      clearTimeout(started);
      resolve(false);
    });
    child.once('exit', (code) => {
      clearTimeout(started);
      child.unref();
      resolve(code === 0);
    });
  });
}
