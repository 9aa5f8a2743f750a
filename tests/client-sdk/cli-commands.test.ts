// Test tier: process
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { createClient } from '@cloud-platform/client';
import { Organization } from '../../server/access/organization.entity.js';
import { User } from '../../server/access/user.entity.js';
import { ManagedDatabase } from '../../server/modules/databases/database.entity.js';
import { HostingSite } from '../../server/modules/hosting/hosting-site.entity.js';
import { Webhook } from '../../server/modules/webhooks/webhook.entity.js';
import { openWebhookSecret } from '../../server/modules/webhooks/webhook-secrets.js';
import { createOrg, uniqueEmail, type TestUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { Terminal } from './support/run-cli.js';

const REQUEST = 'request req_[a-z0-9]+';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** The commands that cover the rest of the API (docs/cli.md), run as a subprocess against a live server. */
/** Whether zsh can run here (.ci/run installs it; elsewhere the zsh completion is checked as text only). */
function zshAvailable(): boolean {
  try {
    execFileSync('zsh', ['-f', '-c', 'exit 0']);
    return true;
  } catch {
    return false;
  }
}

describe('cloud CLI: users, audit, and the rest of the API', function () {
  this.timeout(180_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });
  const em = () => s.deps.db.orm.em.fork();

  async function signedInTerminal(): Promise<{ term: Terminal; owner: TestUser }> {
    const owner = await createOrg(s.deps);
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', owner.email, '--password-stdin'], { input: `${owner.password}\n` }),
    );
    return { term, owner };
  }

  it('users: invite (link printed once), accept, list, show, update role, grant and revoke, remove', async () => {
    const { term, owner } = await signedInTerminal();
    const email = uniqueEmail('grace');
    const invited = json(
      expectOk(await term.run(['users', 'invite', email, '--name', 'Grace', '--no-mail', '--json'])),
    );
    expect(invited.user).to.include({ email, name: 'Grace', role: 'member', status: 'invited' });
    const token = new URL(invited.invitation_url as string).searchParams.get('token')!;

    const guest = new Terminal(s.baseUrl);
    const accepted = expectOk(
      await guest.run(['users', 'accept-invitation', '--token', token, '--password-stdin'], {
        input: 'a-new-password-1\n',
      }),
    );
    expect(accepted.stdout).to.contain(`Sign in with: cloud login --email ${email}`);
    const id = invited.user.id as string;
    expect((await em().findOneOrFail(User, id)).status).to.equal('active');

    const list = json(expectOk(await term.run(['users', 'list', '--json'])));
    expect(list.users.map((u: { id: string }) => u.id)).to.have.members([owner.id, id]);
    expect(expectOk(await term.run(['users', 'list', '--role', 'member'])).stdout).to.match(
      new RegExp(`^${id} +${email.replace(/[.]/g, '\\.')} +Grace +member +active `, 'm'),
    );

    const admin = json(expectOk(await term.run(['users', 'update', id, '--role', 'admin', '--json'])));
    expect(admin.user.role).to.equal('admin');
    expect((await em().findOneOrFail(User, id)).role).to.equal('admin');
    expectFailure(
      await term.run(['users', 'update', id]),
      2,
      /^error: nothing to change: give at least one option \(see --help\)$/,
    );

    expectOk(await term.run(['users', 'update', id, '--role', 'member']));
    const granted = json(
      expectOk(
        await term.run([
          'users',
          'permissions',
          id,
          '--grant',
          'hosting:write',
          '--revoke',
          'vpn:read',
          '--json',
        ]),
      ),
    );
    expect(granted.permissions.hosting).to.include({ read: true, write: true });
    expect(granted.permissions.vpn).to.include({ read: false });
    const stored = await em().findOneOrFail(User, id);
    expect(stored.permissions).to.include('hosting:write');
    expect(stored.permissions).not.to.include('vpn:read');
    const shown = expectOk(await term.run(['users', 'show', id]));
    expect(shown.stdout).to.match(/^role: +member$/m);
    expect(shown.stdout).to.match(/^hosting +read,write$/m);

    // Not on a terminal, without --yes: nothing removed.
    expectFailure(
      await term.run(['users', 'remove', id]),
      2,
      /^error: removing a user needs a confirmation: pass --yes$/,
    );
    const removed = json(expectOk(await term.run(['users', 'remove', id, '--yes', '--json'])));
    expect(removed).to.include({ id, email, resources_transferred_to: owner.id });
    expect((await em().findOneOrFail(User, id)).deletedAt).to.be.instanceOf(Date);
    expectFailure(
      await term.run(['users', 'show', id]),
      4,
      new RegExp(`^error: User not found.* \\[NOT_FOUND, ${REQUEST}\\]$`),
      /^hint: check the id: `cloud users list` lists the ones you can see$/,
    );
  });

  it('databases: create --wait shows the one-time password; resize, update, reset-password, create --from-backup', async () => {
    const { term } = await signedInTerminal();
    const created = expectOk(
      await term.run(['databases', 'create', 'orders', '--engine', 'postgresql', '--wait']),
    );
    expect(created.stdout).to.match(/^status: +running$/m);
    const password = /^password: (\S+)$/m.exec(created.stdout)?.[1];
    expect(password, created.stdout).to.be.a('string');
    expect(created.stdout).to.contain('The password is shown only now');
    // The connection string keeps the password too (a read would mask it).
    expect(created.stdout).to.match(new RegExp(`^connection: +postgresql://[^:]+:${password}@`, 'm'));
    const id = /^id: +(db_\S+)$/m.exec(created.stdout)![1]!;
    const row = await em().findOneOrFail(ManagedDatabase, id, { populate: ['passwordHash'] as never });
    expect(row.passwordHash).to.equal(sha256(password!));
    // Shown once: a later read masks it.
    expect(expectOk(await term.run(['databases', 'show', id])).stdout).not.to.contain(password);

    const resized = json(expectOk(await term.run(['databases', 'resize', id, 'medium', '--wait', '--json'])));
    expect(resized.database).to.include({ size: 'medium', status: 'running' });
    const updated = json(
      expectOk(await term.run(['databases', 'update', id, '--no-backups', '--retention', '14', '--json'])),
    );
    expect(updated.database).to.include({ backup_enabled: false, backup_retention: 14 });
    const stored = await em().findOneOrFail(ManagedDatabase, id);
    expect(stored.size).to.equal('medium');
    expect(stored.backupEnabled).to.equal(false);

    expectFailure(
      await term.run(['databases', 'reset-password', id]),
      2,
      /^error: resetting a database password needs a confirmation: pass --yes$/,
    );
    const reset = expectOk(await term.run(['databases', 'reset-password', id, '--yes']));
    const fresh = /^password: (\S+)$/m.exec(reset.stdout)?.[1];
    expect(fresh).to.be.a('string').and.not.equal(password);
    const again = await em().findOneOrFail(ManagedDatabase, id, { populate: ['passwordHash'] as never });
    expect(again.passwordHash).to.equal(sha256(fresh!));

    const backup = json(expectOk(await term.run(['databases', 'backup', id, '--wait', '--json']))).backup;
    expect(backup.status).to.equal('completed');
    const copy = json(
      expectOk(
        await term.run([
          'databases',
          'create',
          'orders-copy',
          '--engine',
          'postgresql',
          '--from-backup',
          backup.id,
          '--wait',
          '--json',
        ]),
      ),
    );
    expect(copy.database).to.include({
      status: 'running',
      restored_from_backup_id: backup.id,
      size: 'medium',
    });
    expect(copy.database.connection_info.password).to.be.a('string');

    // A third database on the starter plan (two allowed): the limit, and what to do about it.
    expectFailure(
      await term.run(['databases', 'create', 'third', '--engine', 'mysql']),
      5,
      new RegExp(`^error: .*upgrade.* \\[PLAN_LIMIT_EXCEEDED, ${REQUEST}\\]$`),
      /^hint: delete one, or upgrade the plan: `cloud billing plans`, then `cloud billing change <plan>`$/,
    );
  });

  it('sites: update, one deployment, and cancel refused once the build is over (409 with a hint)', async () => {
    const { term } = await signedInTerminal();
    const site = json(
      expectOk(
        await term.run([
          'sites',
          'create',
          'docs',
          '--repo',
          'https://github.com/example/docs',
          '--framework',
          'vue',
          '--json',
        ]),
      ),
    ).site as { id: string };
    const updated = json(
      expectOk(
        await term.run([
          'sites',
          'update',
          site.id,
          '--branch',
          'release',
          '--node-version',
          '22',
          '--env',
          'MODE=prod',
          '--json',
        ]),
      ),
    );
    expect(updated.site).to.include({ branch: 'release' });
    const row = await em().findOneOrFail(HostingSite, site.id);
    expect(row.branch).to.equal('release');

    const deployed = json(expectOk(await term.run(['sites', 'deploy', site.id, '--wait', '--json'])));
    const dep = deployed.deployment.id as string;
    const shown = expectOk(await term.run(['sites', 'deployment', site.id, dep]));
    expect(shown.stdout).to.match(/^status: +success$/m);
    expect(shown.stdout).to.match(/^branch: +release$/m);
    expectFailure(
      await term.run(['sites', 'cancel', site.id, dep]),
      5,
      new RegExp(`^error: .+ \\[CONFLICT, ${REQUEST}\\]$`),
      /^hint: the current state does not allow this: see it with `cloud sites list`, then try again$/,
    );
  });

  it('webhooks: show masks the secret, update pauses, rotate-secret prints the new one once, redeliver, recover', async () => {
    const { term } = await signedInTerminal();
    const hook = json(
      expectOk(
        await term.run(['webhooks', 'create', `${s.baseUrl}/nowhere`, '--events', 'vpn.connected', '--json']),
      ),
    ).webhook as { id: string; secret: string };
    const shown = expectOk(await term.run(['webhooks', 'show', hook.id]));
    expect(shown.stdout).to.match(/^secret: +whsec_\*+/m);
    expect(shown.stdout).not.to.contain(hook.secret);

    const sent = json(expectOk(await term.run(['webhooks', 'test', hook.id, '--json']))).delivery;
    const again = json(expectOk(await term.run(['webhooks', 'redeliver', hook.id, sent.id, '--json'])));
    expect(again.delivery).to.include({ redelivery_of: sent.id, event_id: sent.event_id });
    const recovered = json(
      expectOk(await term.run(['webhooks', 'recover', hook.id, '--since', '1h', '--json'])),
    );
    expect(recovered.deliveries_queued).to.be.a('number');

    const rotated = expectOk(await term.run(['webhooks', 'rotate-secret', hook.id, '--overlap-hours', '0']));
    const secret = /^secret: +(whsec_\S+)$/m.exec(rotated.stdout)?.[1];
    expect(secret).to.be.a('string').and.not.equal(hook.secret);
    expect(rotated.stdout).to.contain('The signing secret is shown only now');
    const row = await em().findOneOrFail(Webhook, hook.id);
    expect(openWebhookSecret(s.deps, row.secret)).to.equal(secret);

    const paused = json(expectOk(await term.run(['webhooks', 'update', hook.id, '--pause', '--json'])));
    expect(paused.webhook.status).to.equal('inactive');
    expect((await em().findOneOrFail(Webhook, hook.id)).status).to.equal('inactive');
    expectFailure(
      await term.run(['webhooks', 'redeliver', hook.id, sent.id]),
      5,
      new RegExp(`^error: The webhook is inactive: .+ \\[CONFLICT, ${REQUEST}\\]$`),
    );
  });

  it('audit list with filters; billing preview, usage, cards, cancel', async () => {
    const { term, owner } = await signedInTerminal();
    expectOk(await term.run(['organization', 'rename', 'Acme Audit']));
    const entries = json(
      expectOk(
        await term.run([
          'audit',
          'list',
          '--action',
          'organization.update',
          '--actor',
          owner.id,
          '--since',
          '1h',
          '--json',
        ]),
      ),
    );
    expect(entries.audit_logs).to.have.length(1);
    expect(entries.audit_logs[0]).to.deep.include({ action: 'organization.update', status: 200 });
    expect(
      json(
        expectOk(
          await term.run(['audit', 'list', '--action', 'organization.update', '--until', '1h', '--json']),
        ),
      ).audit_logs,
    ).to.deep.equal([]);
    expectFailure(
      await term.run(['audit', 'list', '--since', 'yesterday']),
      2,
      /^error: not a time: yesterday/,
    );

    expectOk(await term.run(['billing', 'card-add', 'pm_card_visa']));
    const preview = json(expectOk(await term.run(['billing', 'preview', 'pro', '--json'])));
    expect(preview.invoice.total).to.be.greaterThan(0);
    const human = expectOk(await term.run(['billing', 'preview', 'pro']));
    expect(human.stdout).to.match(/^Total: \$\d+\.\d\d$/m);
    expect(human.stdout).to.contain('Change with: cloud billing change pro');
    // A preview changes nothing.
    expect((await em().findOneOrFail(Organization, owner.organizationId)).plan).to.equal('starter');

    const usage = expectOk(await term.run(['billing', 'usage']));
    expect(usage.stdout).to.match(/^database\.instances +0$/m);
    const cards = json(expectOk(await term.run(['billing', 'cards', '--json']))).payment_methods;
    expect(cards).to.have.length(1);
    const canceled = json(expectOk(await term.run(['billing', 'cancel', '--yes', '--json'])));
    expect(canceled.subscription.cancel_at_period_end).to.equal(true);
    expect(
      json(expectOk(await term.run(['billing', 'cancel', '--undo', '--json']))).subscription
        .cancel_at_period_end,
    ).to.equal(false);
  });

  it('vpn update, servers add (token once) and remove; two-factor setup, enable, disable; register', async () => {
    const { term, owner } = await signedInTerminal();
    const conn = json(
      expectOk(await term.run(['vpn', 'create', 'laptop', '--location', 'eu-west', '--wait', '--json'])),
    ).connection;
    const off = json(
      expectOk(await term.run(['vpn', 'update', conn.id, '--disconnect', '--no-auto-connect', '--json'])),
    );
    expect(off.connection).to.include({ status: 'inactive', auto_connect: false });

    const added = expectOk(
      await term.run([
        'vpn',
        'servers',
        'add',
        '--location',
        'eu-west',
        '--city',
        'Paris',
        '--country',
        'France',
        '--country-code',
        'FR',
        '--host',
        'vpn1.example.net',
      ]),
    );
    const serverId = /^id: +(srv_\S+)$/m.exec(added.stdout)![1]!;
    expect(added.stdout).to.match(/^token: +vst_\S+$/m);
    expect(added.stdout).to.contain('The token is shown only now');
    // Listed once its agent has registered; removed at once.
    const servers = json(
      expectOk(await term.run(['vpn', 'servers', 'list', '--location', 'eu-west', '--json'])),
    );
    expect(servers.servers.length).to.be.greaterThan(0);
    expect(expectOk(await term.run(['vpn', 'servers', 'remove', serverId, '--yes'])).stdout).to.equal(
      `Removed ${serverId}.\n`,
    );
    expectFailure(
      await term.run(['vpn', 'servers', 'remove', serverId, '--yes']),
      4,
      /NOT_FOUND/,
      /^hint: check the id: `cloud vpn servers list` lists the ones you can see$/,
    );

    const setup = json(expectOk(await term.run(['two-factor', 'setup', '--qr-code', 'qr.svg', '--json'])));
    const totp = URI.parse(setup.otpauth_url as string) as TOTP;
    const enabled = expectOk(
      await term.run(['two-factor', 'enable', '--code', totp.generate(), '--password-stdin'], {
        input: owner.password,
      }),
    );
    const codes = enabled.stdout.split('\n').filter((l) => /^ {2}\S+$/.test(l));
    expect(codes).to.have.length(10);
    expect((await em().findOneOrFail(User, owner.id)).twoFactorEnabled).to.equal(true);
    expectOk(
      await term.run(['two-factor', 'disable', '--recovery-code', codes[0]!.trim(), '--password-stdin'], {
        input: owner.password,
      }),
    );
    expect((await em().findOneOrFail(User, owner.id)).twoFactorEnabled).to.equal(false);

    const fresh = new Terminal(s.baseUrl);
    const email = uniqueEmail('founder');
    const registered = json(
      expectOk(
        await fresh.run(
          [
            'register',
            '--email',
            email,
            '--name',
            'Founder',
            '--organization',
            'New Co',
            '--password-stdin',
            '--json',
          ],
          { input: 'founder-password-1' },
        ),
      ),
    );
    expect(registered.user).to.include({ email, role: 'owner' });
    expect(json(expectOk(await fresh.run(['organization', 'show', '--json']))).organization.name).to.equal(
      'New Co',
    );
  });

  it('hints: a wrong password, a session that is no longer valid, validation', async () => {
    const owner = await createOrg(s.deps);
    const term = new Terminal(s.baseUrl);
    expectFailure(
      await term.run(['login', '--email', owner.email, '--password-stdin'], { input: 'wrong-password\n' }),
      3,
      new RegExp(`^error: Invalid email or password.* \\[INVALID_CREDENTIALS, ${REQUEST}\\]$`),
      /^hint: check the email and the password; forgotten it\? `cloud password reset --email <email>`$/,
    );
    // A stored session the server no longer knows (signed out elsewhere).
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token, refreshToken: owner.refreshToken });
    const file = join(term.configHome, 'cloud-platform', 'credentials.json');
    expectOk(
      await term.run(['login', '--email', owner.email, '--password-stdin'], { input: owner.password }),
    );
    await client.auth.sessions.revokeAll.mutate({ keep_current: false });
    expectFailure(
      await term.run(['vpn', 'list']),
      3,
      new RegExp(`^error: .+ \\[(UNAUTHORIZED|TOKEN_EXPIRED|INVALID_CREDENTIALS), ${REQUEST}\\]$`),
      /^hint: sign in again: `cloud login`$/,
    );
    writeFileSync(
      file,
      JSON.stringify({ api_url: s.baseUrl, email: owner.email, token: 'garbage', refresh_token: '' }),
    );
    expectFailure(await term.run(['vpn', 'list']), 3, /UNAUTHORIZED/, /^hint: sign in again: `cloud login`$/);
  });

  it('completion: bash and zsh complete groups, subcommands and options from the tree', async () => {
    const term = new Terminal(s.baseUrl);
    const bash = expectOk(await term.run(['completion', 'bash'])).stdout;
    const script = join(term.home, 'cloud.bash');
    writeFileSync(script, bash);
    const complete = (...words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `source "$0"; COMP_WORDS=(cloud ${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length}; _cloud; echo "\${COMPREPLY[*]}"`,
          script,
        ],
        { encoding: 'utf8' },
      ).trim();
    expect(complete('us').split(' ')).to.deep.equal(['users']);
    expect(complete('users', '').split(' ')).to.include.members([
      'list',
      'invite',
      'show',
      'update',
      'permissions',
      'remove',
    ]);
    expect(complete('databases', 'create', '--fr')).to.equal('--from-backup');
    expect(complete('vpn', 'servers', 'a')).to.equal('add');
    expect(complete('--json', 'webhooks', 'ro')).to.equal('rotate-secret');

    const zsh = expectOk(await term.run(['completion', 'zsh'])).stdout;
    expect(zsh).to.match(/^#compdef cloud$/m);
    expect(zsh).to.contain("'users:the members of the organization");
    if (zshAvailable()) {
      // Run in zsh itself: loaded after compinit it registers _cloud, and offers what the command tree has (zsh's
      // own _describe and compadd, which narrow by the typed prefix, are replaced by printers here).
      const zshScript = join(term.home, '_cloud');
      writeFileSync(zshScript, zsh);
      const registered = execFileSync(
        'zsh',
        [
          '-f',
          '-c',
          'autoload -U compinit; compinit -u -D; source "$1"; print -r -- "${_comps[cloud]}"',
          'zsh',
          zshScript,
        ],
        { encoding: 'utf8', env: { ...process.env, HOME: term.home } },
      ).trim();
      expect(registered).to.equal('_cloud');
      const zshComplete = (...words: string[]) =>
        execFileSync(
          'zsh',
          [
            '-f',
            '-c',
            [
              'compdef() { :; }',
              'source "$1"; shift',
              'compadd() { shift; print -r -- "$*"; }',
              '_describe() { print -r -- ${${(@P)2}%%:*}; }',
              '_files() { print files; }',
              'words=(cloud "$@"); CURRENT=$#words; _cloud',
            ].join('\n'),
            'zsh',
            zshScript,
            ...words,
          ],
          { encoding: 'utf8' },
        ).trim();
      expect(zshComplete('').split(' ')).to.include.members(['users', 'databases', 'completion']);
      expect(zshComplete('users', '').split(' ')).to.include.members([
        'list',
        'invite',
        'permissions',
        'remove',
      ]);
      expect(zshComplete('databases', 'create', '--fr').split(' ')).to.include('--from-backup');
      expect(zshComplete('--json', 'webhooks', 'ro').split(' ')).to.include('rotate-secret');
    } else {
      console.warn('    zsh is not installed: the zsh completion is checked as text only');
    }
    expectFailure(
      await term.run(['completion', 'fish']),
      2,
      /^error: no completion for fish: use bash or zsh$/,
    );
  });
});
