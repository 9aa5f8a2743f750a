/**
 * Compile-time tests of the SDK's types (`npm run typecheck` compiles this file; nothing here runs). Each
 * `@ts-expect-error` line must fail to compile: if the SDK ever accepted it, the directive itself would be the error.
 */
import {
  AuthenticationError,
  PlatformApiError,
  RateLimitError,
  ValidationError,
  createClient,
  type ApiErrorCode,
  type ErrorDetail,
  type PlatformClient,
  type RouterInputs,
  type RouterOutputs,
} from '@cloud-platform/client';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** `is<Expected>()(value)` compiles only when the value's type is exactly `Expected`. */
const is =
  <Expected>() =>
  <Actual>(_value: Actual, ..._proof: Equal<Actual, Expected> extends true ? [] : ['type differs']): void =>
    undefined;

export async function correctUse(client: PlatformClient): Promise<void> {
  const login = await client.login('ada@example.com', 'correct-horse-battery');
  is<string>()(login.token);
  is<'Bearer'>()(login.token_type);

  const viaProcedure = await client.auth.login.mutate({ email: 'ada@example.com', password: 'pw' });
  is<RouterOutputs['auth']['login']>()(viaProcedure);

  // Single sign-on: the IdP's address, then the one-time code it came back with for the login body.
  const started = await client.sso.start.mutate({
    email: 'ada@acme.com',
    return_to: 'http://127.0.0.1:53682/callback',
  });
  is<string>()(started.authorization_url);
  const viaSso = await client.loginWithSsoCode('ssoc_abc');
  is<RouterOutputs['sso']['token']>()(viaSso);
  is<'Bearer'>()(viaSso.token_type);
  is<'owner' | 'admin' | 'member'>()(viaSso.user.role);

  const me = await client.auth.me.query();
  is<string>()(me.user.email);
  is<string | null>()(me.user.last_login);
  is<'owner' | 'admin' | 'member'>()(me.user.role);
  is<true>()(me.success);

  const registered = await client.auth.register.mutate({
    email: 'ada@example.com',
    password: 'correct-horse-battery',
    name: 'Ada',
    organization_name: 'Analytical Engines',
  });
  client.setTokens({ token: registered.token, refreshToken: registered.refresh_token });
  const refreshInput: RouterInputs['auth']['refresh'] = { refresh_token: registered.refresh_token };
  const refreshed = await client.auth.refresh.mutate(refreshInput);
  is<number>()(refreshed.expires_in);

  const out = await client.logout();
  is<string>()(out.message);
  const { token, refreshToken } = client.getTokens();
  is<string | undefined>()(token);
  is<string | undefined>()(refreshToken);

  try {
    await client.auth.me.query(undefined, { signal: AbortSignal.timeout(1000) });
  } catch (err) {
    if (err instanceof RateLimitError) is<number | undefined>()(err.retryAfter);
    if (err instanceof ValidationError) {
      const details: ErrorDetail[] | undefined = err.details;
      void details;
    }
    if (err instanceof AuthenticationError && err.code === 'TOKEN_EXPIRED') return;
    if (err instanceof PlatformApiError) {
      const status: number = err.status;
      const requestId: string | undefined = err.requestId;
      void status;
      void requestId;
    }
  }

  const code: ApiErrorCode = 'PLAN_LIMIT_EXCEEDED';
  void code;
}

export function createOptions(): PlatformClient[] {
  return [
    createClient({ baseUrl: 'https://api.example.com' }),
    createClient({ baseUrl: 'https://api.example.com', token: 'jwt', refreshToken: 'rt_x' }),
    createClient({
      baseUrl: 'https://api.example.com',
      getToken: async () => null,
      onTokens: async (t) => void [t.token, t.refreshToken, t.expiresIn],
      fetch: (url, init) => fetch(url, init),
    }),
  ];
}

export async function misuse(client: PlatformClient): Promise<void> {
  // Wrong input field type.
  // @ts-expect-error -- password must be a string
  await client.auth.login.mutate({ email: 'ada@example.com', password: 12345678 });

  // Missing required field.
  // @ts-expect-error -- organization_name is required
  await client.auth.register.mutate({
    email: 'ada@example.com',
    password: 'correct-horse-battery',
    name: 'Ada',
  });

  // Unknown procedure, and unknown module.
  // @ts-expect-error -- auth has no procedure named whoami
  await client.auth.whoami.query();
  // @ts-expect-error -- there is no module named nothing
  await client.nothing.list.query();

  // Wrong call type: me is a query, login a mutation.
  // @ts-expect-error -- queries have no mutate()
  await client.auth.me.mutate();
  // @ts-expect-error -- mutations have no query()
  await client.auth.login.query({ email: 'ada@example.com', password: 'pw' });

  // Reading a field that does not exist on the output.
  const me = await client.auth.me.query();
  // @ts-expect-error -- the user has no password_hash
  void me.user.password_hash;
  const login = await client.login('ada@example.com', 'pw');
  // @ts-expect-error -- the login response names it refresh_token
  void login.refreshToken;

  // Helpers are typed too.
  // @ts-expect-error -- login takes an email and a password
  await client.login('ada@example.com');
  // @ts-expect-error -- loginWithSsoCode takes the code itself, not an object
  await client.loginWithSsoCode({ code: 'ssoc_abc' });
  // @ts-expect-error -- a login with a code has no two-factor step: its body is never a challenge
  void (await client.loginWithSsoCode('ssoc_abc')).challenge_token;
  // @ts-expect-error -- setTokens takes the SDK's camelCase pair
  client.setTokens({ refresh_token: 'rt_x' });
  // @ts-expect-error -- baseUrl is required
  createClient({ token: 'jwt' });
}
