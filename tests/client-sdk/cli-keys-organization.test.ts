// Test tier: process
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { createClient } from '@cloud-platform/client';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { Terminal } from './support/run-cli.js';

const REQUEST = 'request req_[a-z0-9]+';

describe('cloud CLI: api-keys and organization (a subprocess against a live server)', function () {
  // Each run starts a Node process that compiles the CLI's source.
  this.timeout(180_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  async function signIn(user: TestUser): Promise<Terminal> {
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', user.email, '--password-stdin'], { input: `${user.password}\n` }),
    );
    return term;
  }

  describe('api-keys', () => {
    it('creates a vpn:read key (secret shown once), lists and shows it; the key lists VPN connections, is refused a create, and after revoke is refused at all', async () => {
      const owner = await createOrg(s.deps);
      const term = await signIn(owner);
      const { connection } = await createClient({
        baseUrl: s.baseUrl,
        token: owner.token,
      }).vpn.connections.create.mutate({ name: 'office', location: 'eu-west', protocol: 'wireguard' });

      const created = json(
        expectOk(
          await term.run([
            'api-keys',
            'create',
            'ci',
            '--permission',
            'vpn:read',
            '--expires-in-days',
            '30',
            '--json',
          ]),
        ),
      );
      expect(created.secret).to.match(/^sk_/);
      expect(created.api_key).to.include({
        name: 'ci',
        created_by: owner.id,
        prefix: created.secret.slice(0, 12),
      });
      expect(created.api_key.permissions).to.deep.equal(['vpn:read']);
      const days =
        (Date.parse(created.api_key.expires_at) - Date.parse(created.api_key.created_at)) / 86_400_000;
      expect(Math.round(days)).to.equal(30);
      const keyId = created.api_key.id as string;

      // Human output: the secret once, with the note that it is not shown again; repeated and comma-listed permissions.
      const human = expectOk(
        await term.run([
          'api-keys',
          'create',
          'deploy',
          '--permission',
          'vpn:read,hosting:read',
          '--permission',
          'database:read',
        ]),
      );
      const secretLine = /^secret: +(sk_\S+)$/m.exec(human.stdout);
      expect(secretLine, human.stdout).to.not.equal(null);
      expect(human.stdout).to.contain('The secret is shown only now');
      const permissions = /^permissions: +(\S+)$/m.exec(human.stdout)?.[1]?.split(',');
      expect(permissions, human.stdout).to.have.members(['vpn:read', 'hosting:read', 'database:read']);

      const list = json(expectOk(await term.run(['api-keys', 'list', '--json'])));
      expect(list.api_keys.map((k: { id: string }) => k.id)).to.include(keyId);
      expect(list.total).to.equal(2);
      expect(JSON.stringify(list)).to.not.contain(created.secret);
      const table = expectOk(await term.run(['api-keys', 'list'])).stdout.split('\n');
      expect(table[0]).to.match(/^ID +NAME +PREFIX +PERMISSIONS +EXPIRES +LAST USED$/);
      expect(
        table.some((l) => new RegExp(`^${keyId} +ci +${created.api_key.prefix} +vpn:read `).test(l)),
      ).to.equal(true);
      const shown = expectOk(await term.run(['api-keys', 'show', keyId])).stdout;
      expect(shown).to.match(/^permissions: +vpn:read$/m);
      expect(shown).to.match(/^last used: +never$/m);

      // The key at work, through CLOUD_API_KEY (no stored login in this terminal).
      const ci = new Terminal(s.baseUrl, { CLOUD_API_KEY: created.secret });
      const listed = json(expectOk(await ci.run(['vpn', 'list', '--json'])));
      expect(listed.connections.map((c: { id: string }) => c.id)).to.deep.equal([connection.id]);
      expectFailure(
        await ci.run(['vpn', 'create', 'more', '--location', 'eu-west']),
        3,
        new RegExp(`^error: This action requires the vpn:write permission: .+ \\[FORBIDDEN, ${REQUEST}\\]$`),
        /^hint: the API key in CLOUD_API_KEY does not allow this/,
      );
      expectFailure(
        await ci.run(['api-keys', 'list']),
        3,
        /^error: This operation cannot be called with an API key: .+ \[FORBIDDEN, .+\]$/,
        /^hint: the API key in CLOUD_API_KEY cannot do this/,
      );

      // Not on a terminal: revoke needs --yes, and without it nothing changes.
      expectFailure(
        await term.run(['api-keys', 'revoke', keyId]),
        2,
        /^error: revoking an API key needs a confirmation: pass --yes$/,
      );
      expectOk(await ci.run(['vpn', 'list']));

      const revoked = json(expectOk(await term.run(['api-keys', 'revoke', keyId, '--yes', '--json'])));
      expect(revoked).to.include({ success: true, id: keyId });
      expectFailure(
        await ci.run(['vpn', 'list']),
        3,
        new RegExp(`^error: .+ \\[UNAUTHORIZED, ${REQUEST}\\]$`),
      );
      expectFailure(
        await term.run(['api-keys', 'show', keyId]),
        4,
        new RegExp(
          `^error: API key not found: check the id, or list them with GET /v1/api-keys \\[NOT_FOUND, ${REQUEST}\\]$`,
        ),
      );
      expect(json(expectOk(await term.run(['api-keys', 'list', '--json']))).total).to.equal(1);
    });

    it('usage errors: a missing argument or option, a bad number: one line, exit 2, nothing created', async () => {
      const owner = await createOrg(s.deps);
      const term = await signIn(owner);
      expectFailure(
        await term.run(['api-keys', 'create', '--permission', 'vpn:read']),
        2,
        /^error: missing required argument 'name'$/,
      );
      expectFailure(
        await term.run(['api-keys', 'create', 'ci']),
        2,
        /^error: required option '--permission <permission>' not specified$/,
      );
      expectFailure(
        await term.run(['api-keys', 'create', 'ci', '--permission', 'vpn:read', '--expires-in-days', 'soon']),
        2,
        /^error: not a positive whole number: soon$/,
      );
      expectFailure(
        await term.run(['api-keys', 'create', 'ci', '--permission', 'vpn:fly']),
        2,
        new RegExp(`^error: .+ \\[VALIDATION_ERROR, ${REQUEST}\\]$`),
      );
      expectFailure(await term.run(['api-keys', 'show']), 2, /^error: missing required argument 'id'$/);
      expectFailure(await term.run(['api-keys', 'revoke']), 2, /^error: missing required argument 'id'$/);
      expect(json(expectOk(await term.run(['api-keys', 'list', '--json']))).api_keys).to.deep.equal([]);
    });
  });

  describe('organization', () => {
    it('shows and renames it, transfers ownership to an admin, and the new owner deletes it (a wrong name first); the stored login is then removed', async () => {
      const owner = await createOrg(s.deps, { name: 'Test Org' });
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const term = await signIn(owner);

      const shown = json(expectOk(await term.run(['organization', 'show', '--json'])));
      expect(shown.organization).to.include({
        id: owner.organizationId,
        name: 'Test Org',
        owner_id: owner.id,
        users_count: 2,
        plan: 'starter',
      });
      expect(expectOk(await term.run(['organization', 'show'])).stdout).to.match(/^name: +Test Org$/m);

      expect(expectOk(await term.run(['organization', 'rename', 'Acme Labs'])).stdout).to.equal(
        'Renamed the organization: Acme Labs\n',
      );
      expect(json(expectOk(await term.run(['organization', 'show', '--json']))).organization.name).to.equal(
        'Acme Labs',
      );
      expectFailure(
        await term.run(['organization', 'rename']),
        2,
        /^error: missing required argument 'name'$/,
      );

      // Transfer: a missing argument, no password, a wrong password, then the right one.
      expectFailure(
        await term.run(['organization', 'transfer-ownership']),
        2,
        /^error: missing required argument 'user_id'$/,
      );
      expectFailure(
        await term.run(['organization', 'transfer-ownership', admin.id]),
        2,
        /^error: no password: give it on standard input with --password-stdin$/,
      );
      expectFailure(
        await term.run(['organization', 'transfer-ownership', admin.id, '--password-stdin'], {
          input: 'wrong-password\n',
        }),
        3,
        new RegExp(`^error: Invalid password: .+ \\[INVALID_CREDENTIALS, ${REQUEST}\\]$`),
      );
      const transferred = json(
        expectOk(
          await term.run(['organization', 'transfer-ownership', admin.id, '--password-stdin', '--json'], {
            input: `${owner.password}\n`,
          }),
        ),
      );
      expect(transferred.organization.owner_id).to.equal(admin.id);
      expect(transferred.previous_owner_id).to.equal(owner.id);
      expect(json(expectOk(await term.run(['whoami', '--json']))).user.role).to.equal('admin');
      // The former owner, now an admin, may not delete it.
      expectFailure(
        await term.run(['organization', 'delete', '--confirm', 'Acme Labs', '--yes', '--password-stdin'], {
          input: owner.password,
        }),
        3,
        new RegExp(`^error: .+ \\[FORBIDDEN, ${REQUEST}\\]$`),
      );

      const newOwner = await signIn(admin);
      const file = join(newOwner.configHome, 'cloud-platform', 'credentials.json');
      // Not on a terminal: the name and --yes are required; a wrong name changes nothing.
      expectFailure(
        await newOwner.run(['organization', 'delete', '--password-stdin'], { input: admin.password }),
        2,
        /^error: deleting the organization needs a confirmation: pass --confirm <its exact name> --yes$/,
      );
      expectFailure(
        await newOwner.run(['organization', 'delete', '--confirm', 'Acme Labs'], { input: admin.password }),
        2,
        /--confirm <its exact name> --yes$/,
      );
      expectFailure(
        await newOwner.run(['organization', 'delete', '--confirm', 'Acme', '--yes', '--password-stdin'], {
          input: admin.password,
        }),
        2,
        new RegExp(
          `^error: Invalid request: confirm: Must be the organization’s exact name \\[VALIDATION_ERROR, ${REQUEST}\\]$`,
        ),
        /^hint: see the accepted values: `cloud organization delete --help`$/,
      );
      expect(json(expectOk(await newOwner.run(['organization', 'show', '--json']))).organization.id).to.equal(
        owner.organizationId,
      );

      const deleted = json(
        expectOk(
          await newOwner.run(
            ['organization', 'delete', '--confirm', 'Acme Labs', '--yes', '--password-stdin', '--json'],
            {
              input: `${admin.password}\n`,
            },
          ),
        ),
      );
      expect(deleted).to.include({ success: true, id: owner.organizationId, signed_out: true });
      expect(Date.parse(deleted.deletion_scheduled)).to.be.a('number').and.not.NaN;
      expect(existsSync(file)).to.equal(false);
      expectFailure(
        await newOwner.run(['organization', 'show']),
        3,
        /^error: not signed in: run `cloud login`/,
      );
      // The other user's stored session is refused from now on too.
      const stored = JSON.parse(
        readFileSync(join(term.configHome, 'cloud-platform', 'credentials.json'), 'utf8'),
      ) as { token: string };
      expect(stored.token).to.be.a('string');
      expectFailure(await term.run(['organization', 'show']), 3, new RegExp(`\\[[A-Z_]+, ${REQUEST}\\]$`));
    });

    it('delete in human form says the stored credentials were removed', async () => {
      const owner = await createOrg(s.deps, { name: 'Short Lived' });
      const term = await signIn(owner);
      const run = expectOk(
        await term.run(['organization', 'delete', '--confirm', 'Short Lived', '--yes', '--password-stdin'], {
          input: owner.password,
        }),
      );
      expect(run.stdout).to.match(
        new RegExp(`^Deleted ${owner.organizationId}: everything in it is removed by `, 'm'),
      );
      expect(run.stdout).to.match(
        /^Its sessions and API keys are refused from now on, so the stored credentials were removed \(/m,
      );
    });
  });
});
