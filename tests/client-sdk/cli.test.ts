// Test tier: process
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { createClient } from '@cloud-platform/client';
import { createOrg, type TestUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { stderrLines, Terminal } from './support/run-cli.js';

describe('cloud CLI (a subprocess against a live server)', function () {
  // Each run starts a Node process that compiles the CLI's source.
  this.timeout(120_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  async function signedInTerminal(): Promise<{ term: Terminal; owner: TestUser }> {
    const owner = await createOrg(s.deps);
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', owner.email, '--password-stdin'], { input: `${owner.password}\n` }),
    );
    return { term, owner };
  }

  describe('login, whoami, logout', () => {
    it('signs in, keeps the session in $XDG_CONFIG_HOME/cloud-platform/credentials.json (0600), and whoami reads it', async () => {
      const owner = await createOrg(s.deps);
      const term = new Terminal(s.baseUrl);
      const login = expectOk(
        await term.run(['login', '--email', owner.email, '--password-stdin'], {
          input: `${owner.password}\n`,
        }),
      );
      expect(login.stdout).to.contain(`Signed in to ${s.baseUrl} as ${owner.email} (owner).`);

      const file = join(term.configHome, 'cloud-platform', 'credentials.json');
      expect(statSync(file).mode & 0o777).to.equal(0o600);
      expect(statSync(join(term.configHome, 'cloud-platform')).mode & 0o777).to.equal(0o700);
      const stored = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
      expect(stored).to.include({ api_url: s.baseUrl, email: owner.email });
      expect(stored.token).to.be.a('string');
      expect(stored.refresh_token).to.match(/^rt_/);

      const me = json(expectOk(await term.run(['whoami', '--json'])));
      expect(me.user).to.include({ id: owner.id, email: owner.email, role: 'owner' });
      const human = expectOk(await term.run(['whoami']));
      expect(human.stdout).to.match(new RegExp(`^email: +${owner.email}$`, 'm'));

      expect(expectOk(await term.run(['logout'])).stdout).to.contain('Signed out');
      expect(existsSync(file)).to.equal(false);
      // The session is over on the server too: its refresh token no longer works.
      const refreshed = await fetch(`${s.baseUrl}/v1/auth/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: stored.refresh_token }),
      });
      expect(refreshed.status).to.equal(401);
      expectFailure(await term.run(['whoami']), 3, /^error: not signed in: run `cloud login`/);
    });

    it('a wrong password: one line with the code and the request id, exit 3, nothing stored', async () => {
      const owner = await createOrg(s.deps);
      const term = new Terminal(s.baseUrl);
      const run = await term.run(['login', '--email', owner.email, '--password-stdin'], {
        input: 'wrong-password\n',
      });
      expectFailure(
        run,
        3,
        /^error: Invalid email or password: check both, or reset the password with POST \/v1\/auth\/password-reset \[INVALID_CREDENTIALS, request req_[a-z0-9]+\]$/,
        /^hint: check the email and the password; forgotten it\? `cloud password reset --email <email>`$/,
      );
      expect(existsSync(join(term.configHome, 'cloud-platform', 'credentials.json'))).to.equal(false);
    });

    it('two-factor sign-in: without a code one line and exit 3; with a recovery code signed in', async () => {
      const owner = await createOrg(s.deps);
      const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
      const { otpauth_url } = await client.auth.twoFactor.setup.mutate({});
      const code = (URI.parse(otpauth_url) as TOTP).generate();
      const { recovery_codes } = await client.auth.twoFactor.enable.mutate({
        password: owner.password,
        code,
      });

      const term = new Terminal(s.baseUrl);
      const login = ['login', '--email', owner.email, '--password-stdin'];
      expectFailure(
        await term.run(login, { input: owner.password }),
        3,
        /^error: this account has two-factor sign-in on: pass --code or --recovery-code$/,
      );
      expectOk(await term.run([...login, '--recovery-code', recovery_codes[0]!], { input: owner.password }));
      expect(json(expectOk(await term.run(['whoami', '--json']))).user.two_factor_enabled).to.equal(true);
    });

    it('uses an API key from CLOUD_API_KEY instead of a stored login; whoami (an /auth call) says a key cannot do it', async () => {
      const owner = await createOrg(s.deps);
      const { secret } = await createClient({ baseUrl: s.baseUrl, token: owner.token }).apiKeys.create.mutate(
        {
          name: 'ci',
          permissions: ['vpn:read'],
        },
      );
      const term = new Terminal(s.baseUrl, { CLOUD_API_KEY: secret });
      expect(json(expectOk(await term.run(['vpn', 'list', '--json']))).connections).to.deep.equal([]);
      expectFailure(
        await term.run(['whoami']),
        3,
        /^error: This operation cannot be called with an API key: .+ \[FORBIDDEN, request req_[a-z0-9]+\]$/,
        /^hint: the API key in CLOUD_API_KEY cannot do this: unset CLOUD_API_KEY to use your `cloud login`$/,
      );
      const bad = await term.run(['whoami'], { env: { CLOUD_API_KEY: 'not-a-key' } });
      expectFailure(bad, 3, /^error: .+ \[UNAUTHORIZED, request req_[a-z0-9]+\]$/);
    });
  });

  describe('usage errors', () => {
    it('a missing argument, an unknown command or option: one line, exit 2', async () => {
      const term = new Terminal(s.baseUrl);
      expectFailure(await term.run(['vpn', 'show']), 2, /^error: missing required argument 'id'$/);
      expectFailure(await term.run(['vpn', 'launch']), 2, /^error: unknown command 'launch'/);
      expectFailure(await term.run(['sites', 'list', '--colour']), 2, /^error: unknown option '--colour'$/);
    });

    it('--help works on every level and exits 0', async () => {
      const term = new Terminal(s.baseUrl);
      const top = expectOk(await term.run(['--help']));
      for (const group of [
        'login',
        'vpn',
        'sites',
        'databases',
        'billing',
        'webhooks',
        'api-keys',
        'organization',
      ]) {
        expect(top.stdout).to.match(new RegExp(`^  ${group}\\b`, 'm'));
      }
      expect(expectOk(await term.run(['sites', 'deploy', '--help'])).stdout).to.contain('--follow');
    });
  });

  describe('VPN', () => {
    it('creates a connection, writes its wg-quick file (0600), waits until active, lists and shows it; an unknown id is one line, exit 4', async () => {
      const { term } = await signedInTerminal();
      const conf = join(term.home, 'office.conf');
      const created = json(
        expectOk(
          await term.run([
            'vpn',
            'create',
            'office',
            '--location',
            'eu-west',
            '--config-file',
            conf,
            '--wait',
            '--json',
          ]),
        ),
      );
      expect(created.connection).to.include({ name: 'office', status: 'active', protocol: 'wireguard' });
      expect(created.config_file).to.equal(conf);
      expect(statSync(conf).mode & 0o777).to.equal(0o600);
      const wgQuick = readFileSync(conf, 'utf8');
      expect(wgQuick).to.equal(created.connection.config.wg_quick);
      expect(wgQuick).to.match(/^\[Interface\]\nPrivateKey = /m);
      expect(wgQuick).to.contain(`Endpoint = ${created.connection.config.endpoint}`);

      const list = json(expectOk(await term.run(['vpn', 'list', '--json'])));
      expect(list.connections.map((c: { id: string }) => c.id)).to.deep.equal([created.connection.id]);
      const table = expectOk(await term.run(['vpn', 'list'])).stdout.split('\n');
      expect(table[0]).to.match(/^ID +NAME +STATUS +LOCATION +PROTOCOL +CREATED$/);
      expect(table[1]).to.match(new RegExp(`^${created.connection.id} +office +active +eu-west +wireguard `));

      const shown = expectOk(await term.run(['vpn', 'show', created.connection.id]));
      expect(shown.stdout).to.match(/^status: +active$/m);

      expectFailure(
        await term.run(['vpn', 'show', 'vpn_doesnotexist0000000']),
        4,
        /^error: VPN connection not found: check the id, or list them with GET \/v1\/vpn\/connections \[NOT_FOUND, request req_[a-z0-9]+\]$/,
        /^hint: check the id: `cloud vpn list` lists the ones you can see$/,
      );
      expectOk(await term.run(['vpn', 'delete', created.connection.id]));
      expect(json(expectOk(await term.run(['vpn', 'list', '--json']))).connections).to.deep.equal([]);
    });
  });

  describe('sites', () => {
    it('deploys a site and follows its build log until success', async () => {
      const { term } = await signedInTerminal();
      const site = json(
        expectOk(
          await term.run([
            'sites',
            'create',
            'blog',
            '--repo',
            'https://github.com/example/blog',
            '--framework',
            'react',
            '--json',
          ]),
        ),
      ).site as { id: string };

      const deploy = expectOk(await term.run(['sites', 'deploy', site.id, '--follow']));
      const lines = deploy.stdout.split('\n');
      const first = lines.findIndex((l) => l.includes('Cloning https://github.com/example/blog'));
      const ready = lines.findIndex((l) => /Deployment ready at https:\/\//.test(l));
      expect(first, deploy.stdout).to.be.greaterThanOrEqual(0);
      expect(ready).to.be.greaterThan(first);
      expect(deploy.stdout).to.match(/^status: +success$/m);
      expect(deploy.stdout).to.match(/^live: +yes$/m);

      const followed = json(expectOk(await term.run(['sites', 'deploy', site.id, '--follow', '--json'])));
      expect(followed.deployment).to.include({ status: 'success', live: true });
      const seqs = (followed.logs as { seq: number }[]).map((l) => l.seq);
      expect(seqs).to.deep.equal(seqs.map((_, i) => i + 1));

      const deployments = json(expectOk(await term.run(['sites', 'deployments', site.id, '--json'])));
      expect(deployments.deployments).to.have.length(2);
      const older = deployments.deployments[1].id as string;
      const rolledBack = json(expectOk(await term.run(['sites', 'rollback', site.id, older, '--json'])));
      expect(rolledBack.site.live_deployment_id).to.equal(older);
    });

    it('a failing build: the log to its end, then one error line and exit 1', async () => {
      const { term } = await signedInTerminal();
      const site = json(
        expectOk(
          await term.run([
            'sites',
            'create',
            'broken',
            '--repo',
            'https://github.com/example/broken',
            '--framework',
            'vue',
            '--build-command',
            'npm run build && exit 1',
            '--json',
          ]),
        ),
      ).site as { id: string };
      const run = await term.run(['sites', 'deploy', site.id, '--follow']);
      expect(run.code).to.equal(1);
      expect(run.stdout).to.match(/^status: +failed$/m);
      expect(stderrLines(run).at(-1)).to.match(/^error: deployment dep_[a-z0-9]+ ended failed$/);
    });
  });

  describe('billing', () => {
    it('adds a card, changes the plan (--yes), lists the invoice and downloads its PDF', async () => {
      const { term } = await signedInTerminal();
      expectOk(await term.run(['billing', 'card-add', 'pm_card_visa']));
      // Not on a terminal and no --yes: nothing is charged.
      expectFailure(await term.run(['billing', 'change', 'pro']), 2, /^error: .*pass --yes$/);
      expect(json(expectOk(await term.run(['billing', 'plan', '--json']))).subscription.plan).to.equal(
        'starter',
      );

      const changed = json(expectOk(await term.run(['billing', 'change', 'pro', '--yes', '--json'])));
      expect(changed.subscription.plan).to.equal('pro');
      expect(changed.invoice.status).to.equal('paid');
      expect(changed.invoice.total).to.equal(changed.preview.total);

      const invoices = json(expectOk(await term.run(['billing', 'invoices', '--json'])));
      expect(invoices.invoices.map((i: { id: string }) => i.id)).to.deep.equal([changed.invoice.id]);

      const downloaded = expectOk(await term.run(['billing', 'download', changed.invoice.id]));
      const file = join(term.home, `${changed.invoice.number}.pdf`);
      expect(downloaded.stdout).to.contain(`Saved ${file}`);
      const pdf = readFileSync(file);
      expect(pdf.subarray(0, 5).toString('latin1')).to.equal('%PDF-');

      expectFailure(
        await term.run(['billing', 'download', 'inv_doesnotexist000000']),
        4,
        /^error: Invoice not found: .+ \[NOT_FOUND, request req_[a-z0-9]+\]$/,
      );
    });
  });

  describe('databases and webhooks', () => {
    it('creates a database and waits until it runs, backs it up, schedules and cancels its deletion', async () => {
      const { term } = await signedInTerminal();
      const db = json(
        expectOk(
          await term.run(['databases', 'create', 'orders', '--engine', 'postgresql', '--wait', '--json']),
        ),
      ).database as { id: string; status: string };
      expect(db.status).to.equal('running');
      const backup = json(
        expectOk(await term.run(['databases', 'backup', db.id, '--wait', '--json'])),
      ).backup;
      expect(backup.status).to.equal('completed');
      const deleting = json(expectOk(await term.run(['databases', 'delete', db.id, '--json'])));
      expect(deleting.deletion_scheduled).to.be.a('string');
      expect(
        json(expectOk(await term.run(['databases', 'cancel-deletion', db.id, '--json']))).database.status,
      ).to.equal('running');
    });

    it('creates a webhook, sends a test event and lists its deliveries', async () => {
      const { term } = await signedInTerminal();
      const hook = json(
        expectOk(
          await term.run([
            'webhooks',
            'create',
            `${s.baseUrl}/nowhere`,
            '--events',
            'vpn.connected',
            '--json',
          ]),
        ),
      ).webhook as { id: string; secret: string };
      expect(hook.secret).to.match(/^whsec_/);
      const sent = json(expectOk(await term.run(['webhooks', 'test', hook.id, '--json'])));
      expect(sent.delivery.event_type).to.equal('webhook.test');
      const deliveries = json(expectOk(await term.run(['webhooks', 'deliveries', hook.id, '--json'])));
      expect(deliveries.deliveries.map((d: { id: string }) => d.id)).to.include(sent.delivery.id);
    });
  });
});
