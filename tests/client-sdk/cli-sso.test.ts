// Test tier: process
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { sha256Hex } from '../../server/lib/crypto.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { createOrg, createUser, DEFAULT_PASSWORD, type TestUser } from '../support/factories.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';
import { SamlTestIdp } from '../support/saml-idp.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { waitFor } from '../support/wait.js';
import { expectFailure, expectOk, json } from './support/cli-expect.js';
import { Terminal, type CliRun } from './support/run-cli.js';

/**
 * docs/cli.md, "Signing in" and "organization": `cloud organization sso set|show|delete`, `cloud domains verify` and
 * `cloud login --sso`, run as subprocesses against a live server and a real OpenID Connect provider on loopback. The
 * browser is a program of the test (`BROWSER`) that writes down the address it is given; the test then plays the
 * person at the provider, and the provider's answer goes back to the CLI's listener.
 */

const PUBLIC_BASE_URL = 'https://api.cli-sso.example.test';
const CALLBACK = `${PUBLIC_BASE_URL}/v1/auth/sso/oidc/callback`;

describe('cloud CLI: single sign-on (a subprocess against a live server and an OIDC provider)', function () {
  // Each run starts a Node process that compiles the CLI's source.
  this.timeout(180_000);
  let s: TestServer;
  let dns: TestDnsServer;
  let idp: TestOidcProvider;
  before(async () => {
    dns = await startDnsServer();
    idp = await startOidcProvider({ redirectUris: [CALLBACK] });
    s = await startTestServer({ env: { DNS_SERVERS: dns.address, PUBLIC_BASE_URL } });
  });
  after(async () => {
    await s?.close();
    await idp?.close();
    await dns?.close();
  });

  async function signIn(user: TestUser): Promise<Terminal> {
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', user.email, '--password-stdin'], { input: `${user.password}\n` }),
    );
    return term;
  }

  /**
   * A browser for `BROWSER`: a script that writes the address it is given to a file (and exits `exitCode`: not 0 is
   * an opener that failed).
   */
  function fakeBrowser(term: Terminal, exitCode = 0): { program: string; opened: () => string | undefined } {
    const file = join(term.home, `opened-${randomBytes(4).toString('hex')}`);
    const program = join(term.home, `browser-${randomBytes(4).toString('hex')}.sh`);
    writeFileSync(
      program,
      `#!/bin/sh\nprintf '%s' "$1" > '${file}.tmp' && mv '${file}.tmp' '${file}'\nexit ${exitCode}\n`,
    );
    chmodSync(program, 0o755);
    return { program, opened: () => (existsSync(file) ? readFileSync(file, 'utf8') : undefined) };
  }

  /** The `return_to` the sign-in of this authorization address was started with (the CLI's listener). */
  async function returnToOf(authorizationUrl: string): Promise<string> {
    const state = new URL(authorizationUrl).searchParams.get('state')!;
    const rows = await s.deps.db.orm.em
      .fork()
      .execute<{ return_to: string }[]>('select return_to from sso_sign_ins where state_hash = ?', [
        sha256Hex(state),
      ]);
    return rows[0]!.return_to;
  }

  /** An Enterprise organization whose owner configured OIDC and verified its domain with the CLI. */
  async function configured(): Promise<{ owner: TestUser; term: Terminal; domain: string }> {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const term = await signIn(owner);
    const domain = `acme-${randomBytes(4).toString('hex')}.example`;

    const set = json(
      expectOk(
        await term.run(
          [
            'organization',
            'sso',
            'set',
            '--issuer',
            idp.issuer,
            '--client-id',
            idp.client.clientId,
            '--client-secret-stdin',
            '--domain',
            domain,
            '--json',
          ],
          { input: `${idp.client.clientSecret}\n` },
        ),
      ),
    );
    expect(set.sso).to.include({ protocol: 'oidc', issuer: idp.issuer, client_id: idp.client.clientId });
    expect(set.sso).not.to.have.property('client_secret');
    const [pending] = set.sso.domains;
    expect(pending.verification.status).to.equal('pending');

    // Human output: the TXT record to publish.
    const shown = expectOk(await term.run(['organization', 'sso', 'show']));
    expect(shown.stdout).to.match(/^protocol: +oidc$/m);
    expect(shown.stdout).to.contain(pending.verification.record.name);
    expect(shown.stdout).to.contain(pending.verification.record.value);
    expect(shown.stdout).to.contain('cloud domains verify');

    // Not published yet: the API's 409, exit 5.
    expectFailure(
      await term.run(['domains', 'verify', domain]),
      5,
      /\[DOMAIN_NOT_VERIFIED, request req_\w+\]/,
    );
    dns.txt.set(pending.verification.record.name, [pending.verification.record.value]);
    const verified = expectOk(await term.run(['domains', 'verify', domain.toUpperCase()]));
    expect(verified.stdout).to.contain(`${domain} is verified`);
    return { owner, term, domain };
  }

  /**
   * `cloud login --sso <email>` in `term` with `browser`; once the browser was given the address, `person` signs in
   * at the provider (or cancels) and the provider's answer is followed to the CLI's listener.
   */
  async function ssoLogin(
    term: Terminal,
    email: string,
    person: { account: string; abort?: boolean },
    browser = fakeBrowser(term),
  ): Promise<{ run: CliRun; url: string; page: { status: number; text: string } }> {
    const running = term.run(['login', '--sso', email, '--json'], { env: { BROWSER: browser.program } });
    const url = await waitFor('the browser to be opened', browser.opened, { timeoutMs: 60_000 });
    const returnTo = await returnToOf(url);
    expect(returnTo).to.match(/^http:\/\/127\.0\.0\.1:\d+\/callback\?state=[\w-]+$/);
    // Another page of the machine cannot hand the listener a code: without the listener's state it is refused.
    const forged = await fetch(new URL('/callback?code=ssoc_forged', returnTo));
    expect(forged.status).to.equal(400);
    const result = await idp.signIn(url, person.account, { apiBaseUrl: s.baseUrl, abort: person.abort });
    expect(result.status, result.body).to.equal(302);
    expect(result.location!.startsWith(`${returnTo}&`), result.location!).to.equal(true);
    const back = await fetch(result.location!);
    const page = { status: back.status, text: await back.text() };
    return { run: await running, url, page };
  }

  it('organization sso set/show, domains verify, then login --sso through the browser stores the session like login', async () => {
    const { owner, domain } = await configured();
    const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
    await s.deps.db.orm.em
      .fork()
      .execute('update users set email = ? where id = ?', [`grace@${domain}`, member.id]);
    const account = idp.addAccount({ email: `grace@${domain}`, email_verified: true, name: 'Grace' });

    const term = new Terminal(s.baseUrl);
    const { run, page } = await ssoLogin(term, `grace@${domain}`, { account });
    expect(page.status).to.equal(200);
    expect(page.text).to.contain('You can close this tab');
    const out = json(expectOk(run));
    expect(out.user).to.include({ id: member.id, email: `grace@${domain}` });
    expect(run.stderr).to.contain('Sign in with your identity provider in the browser: ');
    // Stored exactly as `cloud login` stores it: mode 0600, the pair, the API address.
    const file = out.credentials_file as string;
    const stored = JSON.parse(readFileSync(file, 'utf8'));
    expect(Object.keys(stored)).to.have.members(['api_url', 'email', 'token', 'refresh_token']);
    expect(stored).to.include({ api_url: s.baseUrl, email: `grace@${domain}` });
    expect(stored.refresh_token).to.match(/^rt_/);
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    const whoami = json(expectOk(await term.run(['whoami', '--json'])));
    expect(whoami.user.id).to.equal(member.id);
  });

  it('login --sso: a refused sign-in exits 3 with the reason; an opener that fails leaves the address to open by hand', async () => {
    const { domain } = await configured();
    const term = new Terminal(s.baseUrl);
    const account = idp.addAccount({ email: `ada@${domain}`, email_verified: true });
    const refused = await ssoLogin(term, `ada@${domain}`, { account, abort: true });
    expect(refused.page.status).to.equal(400);
    expect(refused.run.code, refused.run.stderr).to.equal(3);
    expect(refused.run.stdout).to.equal('');
    expect(refused.run.stderr.trimEnd().split('\n').at(-1)).to.match(
      /^error: single sign-on refused: .+ \[SSO_IDP_ERROR\]$/,
    );
    expect(existsSync(join(term.configHome, 'cloud-platform', 'credentials.json'))).to.equal(false);

    // No browser could be opened: the address is on stderr with what to do, and the sign-in still completes.
    const { run, url } = await ssoLogin(term, `ada@${domain}`, { account }, fakeBrowser(term, 1));
    expectOk(run);
    expect(run.stderr).to.contain(`in the browser: ${url}\n`);
    expect(run.stderr).to.contain(
      'No browser could be opened: open the address above in a browser of this machine.',
    );
  });

  it('login --sso gives up after --timeout; an address no connection signs in is the API’s 404', async () => {
    const { domain } = await configured();
    const term = new Terminal(s.baseUrl);
    const browser = fakeBrowser(term);
    const slow = await term.run(['login', '--sso', `ada@${domain}`, '--timeout', '1'], {
      env: { BROWSER: browser.program },
    });
    expect(slow.code, slow.stderr).to.equal(1);
    expect(slow.stderr.trimEnd().split('\n').at(-1)).to.equal(
      'error: gave up waiting for the browser after 1s: run `cloud login --sso` again',
    );
    expect(browser.opened()).to.be.a('string');
    expectFailure(
      await term.run(['login', '--sso', 'ada@nowhere.example'], { env: { BROWSER: browser.program } }),
      4,
      /\[NOT_FOUND, request req_\w+\]/,
    );
    expectFailure(
      await term.run(['login', '--sso', `ada@${domain}`, '--password-stdin']),
      2,
      /^error: --sso takes the email itself/,
    );
  });

  it('organization sso set --enforced: a member’s password login is refused with the --sso hint; delete asks, then ends it', async () => {
    const { owner, term, domain } = await configured();
    const member = await createUser(s.deps, owner.organizationId, { role: 'member' });
    const enforced = json(expectOk(await term.run(['organization', 'sso', 'set', '--enforced', '--json'])));
    // Left out: the issuer, the client and its secret stay.
    expect(enforced.sso).to.include({ enforced: true, issuer: idp.issuer, client_id: idp.client.clientId });
    expect(enforced.sso.domains.map((d: { domain: string }) => d.domain)).to.deep.equal([domain]);

    const guest = new Terminal(s.baseUrl);
    expectFailure(
      await guest.run(['login', '--email', member.email, '--password-stdin'], {
        input: `${DEFAULT_PASSWORD}\n`,
      }),
      3,
      /POST \/v1\/auth\/sso\/start .*\[SSO_REQUIRED, request req_\w+\]/,
      /^hint: your organization signs you in through its identity provider: `cloud login --sso <email>`$/,
    );
    // The owner's password login still works (break-glass).
    await signIn(owner);

    expectFailure(await term.run(['organization', 'sso', 'delete']), 2, /--yes/);
    expectOk(await term.run(['organization', 'sso', 'delete', '--yes']));
    expectFailure(await term.run(['organization', 'sso', 'show']), 4, /cloud organization sso set/);
    expectOk(
      await guest.run(['login', '--email', member.email, '--password-stdin'], {
        input: `${DEFAULT_PASSWORD}\n`,
      }),
    );
  });

  it('organization sso set with SAML: metadata from a file or the three fields from options; a mix of protocols is refused', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const term = await signIn(owner);
    const idpSaml = new SamlTestIdp({ entityId: 'https://idp.cli.example.test/saml' });
    const metadata = join(term.home, 'idp-metadata.xml');
    writeFileSync(metadata, idpSaml.metadataXml());
    const set = json(
      expectOk(await term.run(['organization', 'sso', 'set', '--metadata-file', metadata, '--json'])),
    );
    expect(set.sso).to.include({
      protocol: 'saml',
      idp_entity_id: idpSaml.entityId,
      idp_sso_url: idpSaml.ssoUrl,
      issuer: null,
    });
    const shown = expectOk(await term.run(['organization', 'sso', 'show']));
    expect(shown.stdout).to.match(/^protocol: +saml$/m);
    expect(shown.stdout).to.match(new RegExp(`^acs url: +${PUBLIC_BASE_URL}/v1/auth/sso/saml/acs$`, 'm'));
    expect(shown.stdout).to.contain(`entity id:       ${set.sso.entity_id}`);
    expect(shown.stdout).to.contain(set.sso.idp_certificate_fingerprint);

    const certificate = join(term.home, 'idp.pem');
    writeFileSync(certificate, idpSaml.certificate);
    const fields = json(
      expectOk(
        await term.run([
          'organization',
          'sso',
          'set',
          '--idp-entity-id',
          'https://idp.cli.example.test/other',
          '--idp-sso-url',
          'https://idp.cli.example.test/sso2',
          '--idp-certificate-file',
          certificate,
          '--default-role',
          'admin',
          '--json',
        ]),
      ),
    );
    expect(fields.sso).to.include({
      idp_entity_id: 'https://idp.cli.example.test/other',
      idp_sso_url: 'https://idp.cli.example.test/sso2',
      default_role: 'admin',
    });
    expectFailure(
      await term.run(['organization', 'sso', 'set', '--issuer', idp.issuer, '--metadata-file', metadata]),
      2,
      /^error: give the options of one protocol/,
    );
    expectFailure(
      await term.run(['organization', 'sso', 'set', '--enforced']),
      2,
      /^error: a SAML connection needs --metadata-file/,
    );
  });
});
