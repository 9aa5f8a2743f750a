/**
 * A program of an SDK user, outside this repository: tests/client-sdk/package.test.ts installs the packed SDK into
 * an empty project, type-checks this file strictly against the package's own declaration file, and runs it against
 * a live server. Every `@ts-expect-error` line must fail to compile.
 */
import {
  NotFoundError,
  PlatformApiError,
  createClient,
  type BuildLogLine,
  type PlatformClient,
  type RouterInputs,
  type RouterOutputs,
} from '@cloud-platform/client';

type Connection = RouterOutputs['vpn']['connections']['create']['connection'];

async function main(baseUrl: string, email: string, password: string): Promise<void> {
  const client = createClient({ baseUrl });
  const login = await client.login(email, password);
  const tokenType: 'Bearer' = login.token_type;

  const { user } = await client.auth.me.query();
  const role: 'owner' | 'admin' | 'member' = user.role;

  const input: RouterInputs['vpn']['connections']['create'] = {
    name: 'from-the-package',
    location: 'eu-west',
    protocol: 'wireguard',
  };
  const created = await client.vpn.connections.create.mutate(input);
  const connection: Connection = created.connection;
  const wgQuick: string | null = connection.config.wg_quick;

  const { site } = await client.hosting.sites.create.mutate({
    name: 'consumer-site',
    git_repo: 'https://github.com/example/consumer',
    framework: 'react',
  });
  const { deployment } = await client.hosting.sites.deploy.mutate({ id: site.id });
  const lines: BuildLogLine[] = [];
  const stream = client.followDeploymentLogs(site.id, deployment.id);
  for await (const line of stream) lines.push(line);

  let notFound: { code: string; status: number; requestId: string | undefined } | undefined;
  try {
    await client.databases.get.query({ id: 'db_doesnotexist00000000' });
  } catch (err) {
    if (err instanceof NotFoundError)
      notFound = { code: err.code, status: err.status, requestId: err.requestId };
    else throw err;
  }

  console.log(
    JSON.stringify({
      tokenType,
      role,
      email: user.email,
      connection: { id: connection.id, status: connection.status, wgQuick: wgQuick !== null },
      build: { status: stream.status, lines: lines.length, last: lines.at(-1)?.message },
      notFound,
    }),
  );
}

/** Misuse that must not compile (never called). */
export async function misuse(client: PlatformClient): Promise<void> {
  // @ts-expect-error: not a region
  await client.vpn.connections.create.mutate({ name: 'x', location: 'mars', protocol: 'wireguard' });
  // @ts-expect-error: `name` is required
  await client.vpn.connections.create.mutate({ location: 'eu-west', protocol: 'wireguard' });
  // @ts-expect-error: a query is not a mutation
  await client.auth.me.mutate();
  // @ts-expect-error: no such module
  await client.spaceships.list.query();
  const { user } = await client.auth.me.query();
  // @ts-expect-error: `role` is a union of strings, not a number
  const role: number = user.role;
  // @ts-expect-error: the password is a string
  await client.login('ada@example.com', 42);
  // @ts-expect-error: errors carry a string code
  const code: number = new PlatformApiError({ code: 'NOT_FOUND', message: 'x', status: 404 }).code;
  void role;
  void code;
}

const [baseUrl, email, password] = process.argv.slice(2);
if (!baseUrl || !email || !password) throw new Error('usage: consumer <baseUrl> <email> <password>');
await main(baseUrl, email, password);
