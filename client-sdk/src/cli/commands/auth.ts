import { TwoFactorRequiredError, type LoginResult } from '@cloud-platform/client';
import { API_KEY_VARIABLE, positiveInteger, type Cli } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { credentialsFile, loadCredentials, removeCredentials, saveCredentials } from '../credentials.js';
import { CliError, EXIT } from '../exit-codes.js';
import { ask, fields } from '../output.js';
import { listenForSsoCallback, openBrowser } from '../sso-login.js';

interface LoginOptions {
  email?: string;
  passwordStdin?: boolean;
  code?: string;
  recoveryCode?: string;
  sso?: string;
  timeout: number;
}

const interactive = () => Boolean(process.stdin.isTTY);

/** How long `login --sso` waits for the browser by default, in seconds (the sign-in itself lasts 10 minutes). */
const SSO_WAIT_SECONDS = 300;

/** Keeps the session of a sign-in (file mode 0600) and says who signed in. */
function keepSession(cli: Cli, apiUrl: string, result: LoginResult): void {
  const file = credentialsFile(cli.env);
  saveCredentials(
    {
      api_url: apiUrl,
      email: result.user.email,
      token: result.token,
      refresh_token: result.refresh_token,
    },
    file,
  );
  cli.print(
    { user: result.user, api_url: apiUrl, credentials_file: file },
    () =>
      `Signed in to ${apiUrl} as ${result.user.email} (${result.user.role}).\nCredentials saved in ${file}`,
  );
}

/**
 * `cloud login --sso <email>`: the organization's identity provider in the browser, back to a listener of this
 * process on 127.0.0.1 (sso-login.ts), then the one-time code exchanged for the session (docs/sso.md, "Signing in").
 */
async function ssoLogin(cli: Cli, email: string, timeoutSeconds: number): Promise<void> {
  const apiUrl = cli.apiUrl(undefined);
  const client = cli.anonymousClient({ baseUrl: apiUrl });
  const listener = await listenForSsoCallback(timeoutSeconds * 1000);
  try {
    const { authorization_url: url } = await client.sso.start.mutate({ email, return_to: listener.returnTo });
    cli.note(`Sign in with your identity provider in the browser: ${url}`);
    if (!(await openBrowser(url, cli.env))) {
      cli.note('No browser could be opened: open the address above in a browser of this machine.');
    }
    cli.note(`Waiting for the browser (at most ${timeoutSeconds}s)…`);
    const back = await listener.result;
    if ('error' in back) {
      throw new CliError(
        `single sign-on refused: ${back.description || 'the identity provider did not sign you in'} [${back.error}]`,
        EXIT.AUTH,
      );
    }
    keepSession(cli, apiUrl, await client.loginWithSsoCode(back.code));
  } finally {
    listener.close();
  }
}

export default defineCommandGroup({
  name: 'auth',
  register(program, cli) {
    documented(program.command('login'), {
      calls: ['authLogin', 'authTwoFactorVerify', 'ssoStart', 'ssoToken'],
      examples: [
        'cloud login --email ada@example.com',
        'cloud login --email ada@example.com --password-stdin < password.txt --code 123456',
        'cloud login --sso ada@acme.com',
      ],
    })
      .description(
        'sign in and keep the session in the config directory (file mode 0600); --sso <email>: through the identity provider, in the browser',
      )
      .option('--email <email>', 'the account email (asked when absent)')
      .option('--password-stdin', 'read the password from standard input instead of asking')
      .option('--code <code>', 'the two-factor code, for accounts with two-factor sign-in on')
      .option('--recovery-code <code>', 'a recovery code instead of the two-factor code')
      .option(
        '--sso <email>',
        'sign in through your organization’s identity provider, in the browser (no password asked)',
      )
      .option(
        '--timeout <seconds>',
        `with --sso: how long to wait for the browser (default ${SSO_WAIT_SECONDS})`,
        positiveInteger,
        SSO_WAIT_SECONDS,
      )
      .action(async (options: LoginOptions) => {
        if (options.sso !== undefined) {
          if (options.email || options.passwordStdin || options.code || options.recoveryCode) {
            throw new CliError(
              '--sso takes the email itself, and no password or two-factor code: the identity provider asks for them',
              EXIT.USAGE,
            );
          }
          await ssoLogin(cli, options.sso, options.timeout);
          return;
        }
        const email = options.email ?? (interactive() ? await ask('Email: ') : undefined);
        if (!email) throw new CliError('missing --email', EXIT.USAGE);
        const password = await cli.password(options.passwordStdin);

        const apiUrl = cli.apiUrl(undefined);
        const client = cli.anonymousClient({ baseUrl: apiUrl });
        const result = await client
          .login(email, password, {
            twoFactor: async () => {
              if (options.recoveryCode) return { recovery_code: options.recoveryCode };
              const code = options.code ?? (interactive() ? await ask('Two-factor code: ') : undefined);
              if (!code)
                throw new CliError(
                  'this account has two-factor sign-in on: pass --code or --recovery-code',
                  EXIT.AUTH,
                );
              return { code };
            },
          })
          .catch((err: unknown) => {
            throw err instanceof TwoFactorRequiredError ? new CliError(err.message, EXIT.AUTH) : err;
          });
        keepSession(cli, apiUrl, result);
      });

    documented(program.command('logout'), {
      calls: ['authLogout'],
      examples: ['cloud logout'],
    })
      .description('end the session on the server and forget the stored credentials')
      .action(async () => {
        const file = credentialsFile(cli.env);
        const stored = loadCredentials(file);
        if (!stored) {
          cli.print({ signed_out: false }, () => 'Not signed in.');
          return;
        }
        try {
          await cli.client().logout();
        } finally {
          // The local credentials go even when the server could not be told (offline, session already expired).
          removeCredentials(file);
        }
        cli.print({ signed_out: true }, () => `Signed out of ${stored.api_url}.`);
      });

    documented(program.command('whoami'), {
      calls: ['authMe'],
      examples: ['cloud whoami --json'],
    })
      .description(
        `show the signed-in user (not with an API key in ${API_KEY_VARIABLE}: keys cannot call /auth)`,
      )
      .action(async () => {
        const { user } = await cli.client().auth.me.query();
        cli.print({ user }, () =>
          fields({
            email: user.email,
            name: user.name,
            role: user.role,
            organization: user.organization_id,
            'two-factor': user.two_factor_enabled ? 'on' : 'off',
            id: user.id,
            'api url': cli.apiUrl(),
          }),
        );
      });

    documented(program.command('register'), {
      calls: ['authRegister'],
      examples: ["cloud register --email ada@example.com --name 'Ada Lovelace' --organization 'Acme Labs'"],
    })
      .description('create an organization with you as its owner (starter plan), and sign in to it')
      .requiredOption('--email <email>', 'your email')
      .requiredOption('--name <name>', 'your name')
      .requiredOption('--organization <name>', 'the organization’s name')
      .option('--password-stdin', 'read the new password from standard input instead of asking')
      .action(async (o: { email: string; name: string; organization: string; passwordStdin?: boolean }) => {
        const password = await cli.password(o.passwordStdin, 'Choose a password: ');
        const apiUrl = cli.apiUrl(undefined);
        const res = await cli.anonymousClient({ baseUrl: apiUrl }).auth.register.mutate({
          email: o.email,
          password,
          name: o.name,
          organization_name: o.organization,
        });
        const file = credentialsFile(cli.env);
        saveCredentials(
          { api_url: apiUrl, email: res.user.email, token: res.token, refresh_token: res.refresh_token },
          file,
        );
        cli.print(
          { user: res.user, api_url: apiUrl, credentials_file: file },
          () =>
            `Registered ${o.organization} at ${apiUrl}; signed in as ${res.user.email} (${res.user.role}).\n` +
            `Credentials saved in ${file}`,
        );
      });
  },
});
