import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { defineCommandGroup, documented } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { fields, readStdin, table } from '../output.js';

/** The two passwords of a change: asked (hidden), or two lines of standard input with --password-stdin. */
async function currentAndNew(
  cli: { password(stdin: boolean | undefined, prompt?: string): Promise<string> },
  stdin: boolean | undefined,
) {
  if (stdin) {
    const [current, next] = (await readStdin()).split(/\r?\n/);
    if (!current || !next)
      throw new CliError(
        '--password-stdin needs two lines: the current password, then the new one',
        EXIT.USAGE,
      );
    return { current, next };
  }
  const current = await cli.password(false, 'Current password: ');
  const next = await cli.password(false, 'New password: ');
  return { current, next };
}

export default defineCommandGroup({
  name: 'account',
  register(program, cli) {
    const password = program.command('password').description('change or reset the password of your account');

    documented(password.command('change'), {
      calls: ['authPasswordChange'],
      examples: [
        'cloud password change',
        'printf "%s\\n%s\\n" "$OLD" "$NEW" | cloud password change --password-stdin',
      ],
    })
      .description('change your password; every other session of the account is signed out')
      .option('--password-stdin', 'read the current and the new password as two lines of standard input')
      .action(async (o: { passwordStdin?: boolean }) => {
        const { current, next } = await currentAndNew(cli, o.passwordStdin);
        const res = await cli
          .client()
          .auth.password.change.mutate({ current_password: current, new_password: next });
        cli.print(res, () => `Password changed; ${res.sessions_revoked} other session(s) signed out.`);
      });

    documented(password.command('reset'), {
      calls: ['authPasswordRequestReset'],
      examples: ['cloud password reset --email ada@example.com'],
    })
      .description('mail a link to choose a new password (when you cannot sign in)')
      .requiredOption('--email <email>', 'the account email')
      .action(async (o: { email: string }) => {
        const client = cli.anonymousClient({ baseUrl: cli.apiUrl(undefined) });
        const res = await client.auth.password.requestReset.mutate({ email: o.email });
        cli.print(res, () => res.message);
      });

    documented(password.command('reset-confirm'), {
      calls: ['authPasswordConfirmReset'],
      examples: ['cloud password reset-confirm --token pwr_abc123'],
    })
      .description('choose the new password with the token of the mailed link')
      .requiredOption('--token <token>', 'the pwr_… token of the link')
      .option('--password-stdin', 'read the new password from standard input instead of asking')
      .action(async (o: { token: string; passwordStdin?: boolean }) => {
        const next = await cli.password(o.passwordStdin, 'New password: ');
        const client = cli.anonymousClient({ baseUrl: cli.apiUrl(undefined) });
        const res = await client.auth.password.confirmReset.mutate({ token: o.token, new_password: next });
        cli.print(res, () => res.message);
      });

    const sessions = program.command('sessions').description('the login sessions of your account');

    documented(sessions.command('list'), {
      calls: ['authSessionsList'],
      examples: ['cloud sessions list'],
    })
      .description('your live login sessions, newest first (* marks this one)')
      .action(async () => {
        const res = await cli.client().auth.sessions.list.query();
        cli.print(res, () =>
          table(res.sessions, {
            '': (s) => (s.current ? '*' : ''),
            id: (s) => s.id,
            'signed in': (s) => s.created_at,
            'last used': (s) => s.last_used_at,
            expires: (s) => s.expires_at,
            ip: (s) => s.ip ?? '',
            'user agent': (s) => s.user_agent ?? '',
          }),
        );
      });

    documented(sessions.command('revoke'), {
      calls: ['authSessionsRevoke', 'authSessionsRevokeAll'],
      examples: ['cloud sessions revoke ses_abc123', 'cloud sessions revoke --all --keep-current'],
    })
      .description('sign out one session, or every session with --all')
      .argument('[id]', 'the ses_… id of the session (see `cloud sessions list`)')
      .option('--all', 'sign out every session, this one included')
      .option('--keep-current', 'with --all: keep this session signed in')
      .action(async (id: string | undefined, o: { all?: boolean; keepCurrent?: boolean }) => {
        if (o.all) {
          const res = await cli
            .client()
            .auth.sessions.revokeAll.mutate({ keep_current: Boolean(o.keepCurrent) });
          cli.print(res, () => `${res.message} (${res.revoked}).`);
          return;
        }
        if (!id) throw new CliError('give the session id, or --all', EXIT.USAGE);
        const res = await cli.client().auth.sessions.revoke.mutate({ id });
        cli.print(res, () => `Signed out session ${res.id}.`);
      });

    const twoFactor = program
      .command('two-factor')
      .description('two-factor sign-in with an authenticator app (TOTP)');

    documented(twoFactor.command('setup'), {
      calls: ['authTwoFactorSetup'],
      examples: ['cloud two-factor setup --qr-code qr.svg'],
    })
      .description(
        'start enrolling: prints the secret for the authenticator app (then `cloud two-factor enable`)',
      )
      .option('--qr-code <file>', 'also write the QR code to scan as an SVG file')
      .action(async (o: { qrCode?: string }) => {
        const res = await cli.client().auth.twoFactor.setup.mutate({});
        let file: string | null = null;
        if (o.qrCode) {
          file = resolve(o.qrCode);
          writeFileSync(file, res.qr_code_svg, { mode: 0o600 });
        }
        cli.print({ ...res, qr_code_file: file }, () =>
          [
            fields({ secret: res.secret, 'otpauth url': res.otpauth_url }),
            file ? `QR code written to ${file}.` : '',
            'Add it to your authenticator app, then turn two-factor sign-in on with: cloud two-factor enable --code <code>',
          ]
            .filter(Boolean)
            .join('\n'),
        );
      });

    documented(twoFactor.command('enable'), {
      calls: ['authTwoFactorEnable'],
      examples: ['cloud two-factor enable --code 123456'],
    })
      .description('turn two-factor sign-in on with a code of the app; prints the recovery codes once')
      .requiredOption('--code <code>', 'the current code of the authenticator app')
      .option('--password-stdin', 'read your password from standard input instead of asking')
      .action(async (o: { code: string; passwordStdin?: boolean }) => {
        const client = cli.client();
        const password = await cli.password(o.passwordStdin, 'Your password: ');
        const res = await client.auth.twoFactor.enable.mutate({ password, code: o.code });
        cli.print(res, () =>
          [
            'Two-factor sign-in is on. Recovery codes (each works once, for when the app is lost):',
            ...res.recovery_codes.map((c) => `  ${c}`),
            'They are shown only now: store them safely, away from this device.',
          ].join('\n'),
        );
      });

    documented(twoFactor.command('disable'), {
      calls: ['authTwoFactorDisable'],
      examples: [
        'cloud two-factor disable --code 123456',
        'cloud two-factor disable --recovery-code abcd-efgh',
      ],
    })
      .description('turn two-factor sign-in off (your password, and a code or a recovery code)')
      .option('--code <code>', 'the current code of the authenticator app')
      .option('--recovery-code <code>', 'a recovery code instead')
      .option('--password-stdin', 'read your password from standard input instead of asking')
      .action(async (o: { code?: string; recoveryCode?: string; passwordStdin?: boolean }) => {
        if (!o.code && !o.recoveryCode) throw new CliError('give --code or --recovery-code', EXIT.USAGE);
        const client = cli.client();
        const password = await cli.password(o.passwordStdin, 'Your password: ');
        const res = await client.auth.twoFactor.disable.mutate({
          password,
          ...(o.code ? { code: o.code } : {}),
          ...(o.recoveryCode ? { recovery_code: o.recoveryCode } : {}),
        });
        cli.print(res, () => res.message);
      });
  },
});
