/**
 * A browser app's use of the SDK, bundled with it by esbuild for the page of tests/client-sdk/browser.test.ts:
 * each scenario runs in the page (another origin than the API's) and returns what the page could read.
 */
import { createClient, NotFoundError } from '../../../client-sdk/src/index.js';

interface Args {
  baseUrl: string;
  email: string;
  password: string;
}

/** Signs in, lists and creates VPN connections, reads an error's request id, follows a build log. */
async function signedIn({ baseUrl, email, password }: Args) {
  const stored: { token?: string } = {};
  const client = createClient({
    baseUrl,
    onTokens: (t) => {
      stored.token = t.token;
    },
  });
  const login = await client.login(email, password);
  const before = await client.vpn.connections.list.query({});
  const key = crypto.randomUUID();
  const input = { name: 'Browser', location: 'eu-west' as const, protocol: 'wireguard' as const };
  const created = await client.vpn.connections.create.mutate(input, { context: { idempotencyKey: key } });
  const again = await client.vpn.connections.create.mutate(input, { context: { idempotencyKey: key } });
  const after = await client.vpn.connections.list.query({});

  // An error as the SDK gives it, and as a page calling /v1 with fetch reads it.
  let sdkError: { name: string; code: string; requestId: string | undefined } | undefined;
  try {
    await client.vpn.connections.get.query({ id: 'vpn_missing' });
  } catch (err) {
    if (err instanceof NotFoundError) sdkError = { name: err.name, code: err.code, requestId: err.requestId };
  }
  const res = await fetch(`${baseUrl}/v1/vpn/connections/vpn_missing`, {
    headers: { authorization: `Bearer ${stored.token}`, 'x-request-id': 'page-req-1' },
  });
  const body = (await res.json()) as { error: { code: string; request_id: string } };
  const restError = {
    status: res.status,
    header: res.headers.get('x-request-id'),
    code: body.error.code,
    requestId: body.error.request_id,
    rateLimit: res.headers.get('ratelimit'),
  };

  // A build log followed as Server-Sent Events.
  const { site } = await client.hosting.sites.create.mutate({
    name: 'Browser site',
    git_repo: 'https://github.com/acme/web',
    framework: 'react',
  });
  const { deployment } = await client.hosting.sites.deploy.mutate({ id: site.id });
  const stream = client.followDeploymentLogs(site.id, deployment.id);
  const lines: number[] = [];
  for await (const line of stream) lines.push(line.seq);

  return {
    loggedIn: typeof login.token === 'string' && stored.token === login.token,
    before: before.total,
    created: created.connection.id,
    replayed: again.connection.id,
    after: after.connections.map((c) => c.id),
    sdkError,
    restError,
    lines,
    status: stream.status,
  };
}

/** What a page of an origin the API does not allow gets: the browser refuses the answers. */
async function refused({ baseUrl, email, password }: Args) {
  let sdk = 'signed in';
  try {
    await createClient({ baseUrl }).login(email, password);
  } catch (err) {
    sdk = (err as { code?: string }).code ?? String(err);
  }
  let plain = 'read';
  try {
    await fetch(`${baseUrl}/v1/auth/me`);
  } catch (err) {
    plain = (err as Error).name;
  }
  return { sdk, plain };
}

(globalThis as unknown as { app: unknown }).app = { signedIn, refused };
