import { defineCommandGroup } from '../command-group.js';
import { CliError, EXIT } from '../exit-codes.js';
import { readStdin, table } from '../output.js';

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

    password
      .command('change')
      .description('change your password; every other session of the account is signed out')
      .option('--password-stdin', 'read the current and the new password as two lines of standard input')
      .action(async (o: { passwordStdin?: boolean }) => {
        const { current, next } = await currentAndNew(cli, o.passwordStdin);
        const res = await cli
          .client()
          .auth.password.change.mutate({ current_password: current, new_password: next });
        cli.print(res, () => `Password changed; ${res.sessions_revoked} other session(s) signed out.`);
      });

    password
      .command('reset')
      .description('mail a link to choose a new password (when you cannot sign in)')
      .requiredOption('--email <email>', 'the account email')
      .action(async (o: { email: string }) => {
        const client = cli.anonymousClient({ baseUrl: cli.apiUrl(undefined) });
        const res = await client.auth.password.requestReset.mutate({ email: o.email });
        cli.print(res, () => res.message);
      });

    password
      .command('reset-confirm')
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

    sessions
      .command('list')
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

    sessions
      .command('revoke')
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
  },
});
