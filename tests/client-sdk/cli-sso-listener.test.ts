// Test tier: unit
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { CliError } from '../../client-sdk/src/cli/exit-codes.js';
import { listenForSsoCallback, openBrowser } from '../../client-sdk/src/cli/sso-login.js';
import { rejection } from '../support/rejection.js';

/** docs/cli.md, "Signing in": the listener of `cloud login --sso` and the browser opener. */
describe('cloud login --sso: the loopback listener and the browser opener', () => {
  it('listens on 127.0.0.1 only, at /callback with its own state, and takes the first code that carries it', async () => {
    const listener = await listenForSsoCallback(10_000);
    try {
      const returnTo = new URL(listener.returnTo);
      expect(returnTo.hostname).to.equal('127.0.0.1');
      expect(returnTo.pathname).to.equal('/callback');
      const state = returnTo.searchParams.get('state')!;
      expect(state).to.match(/^[\w-]{32}$/);

      // Not on another address of the machine.
      expect(await rejection(fetch(`http://[::1]:${returnTo.port}/callback`))).to.be.instanceOf(Error);
      expect((await fetch(new URL('/favicon.ico', returnTo))).status).to.equal(404);
      expect((await fetch(new URL('/callback?code=ssoc_forged', returnTo))).status).to.equal(400);
      expect((await fetch(new URL(`/callback?state=${state}x&code=ssoc_forged`, returnTo))).status).to.equal(
        400,
      );

      const back = await fetch(`${listener.returnTo}&code=ssoc_right`);
      expect(back.status).to.equal(200);
      expect(back.headers.get('content-type')).to.match(/^text\/html/);
      expect(await back.text()).to.contain('You can close this tab');
      expect(await listener.result).to.deep.equal({ code: 'ssoc_right' });
      // One answer: the listener is closed.
      expect(await rejection(fetch(`${listener.returnTo}&code=ssoc_second`))).to.be.instanceOf(Error);
    } finally {
      listener.close();
    }
  });

  it('brings back a refusal, escaped in its page; gives up after the bounded wait', async () => {
    const listener = await listenForSsoCallback(10_000);
    const refused = await fetch(
      `${listener.returnTo}&error=SSO_USER_DISABLED&error_description=${encodeURIComponent('<b>suspended</b>')}`,
    );
    expect(refused.status).to.equal(400);
    const text = await refused.text();
    expect(text).to.contain('SSO_USER_DISABLED: &lt;b&gt;suspended&lt;/b&gt;');
    expect(await listener.result).to.deep.equal({
      error: 'SSO_USER_DISABLED',
      description: '<b>suspended</b>',
    });

    const idle = await listenForSsoCallback(200);
    const err = await rejection(idle.result);
    expect(err).to.be.instanceOf(CliError);
    expect((err as CliError).message).to.contain('gave up waiting for the browser');
  });

  it('opens the address with BROWSER (one argument, no shell); false when it cannot run or fails', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cloud-browser-'));
    const out = join(dir, 'opened');
    const program = join(dir, 'browser.sh');
    writeFileSync(program, `#!/bin/sh\nprintf '%s|%s' "$#" "$1" > '${out}'\n`);
    chmodSync(program, 0o755);
    const url = 'https://idp.example.test/authorize?a=1&b=$(touch pwned)';
    expect(await openBrowser(url, { BROWSER: program })).to.equal(true);
    expect(readFileSync(out, 'utf8')).to.equal(`1|${url}`);

    const failing = join(dir, 'failing.sh');
    writeFileSync(failing, '#!/bin/sh\nexit 3\n');
    chmodSync(failing, 0o755);
    expect(await openBrowser(url, { BROWSER: failing })).to.equal(false);
    expect(await openBrowser(url, { BROWSER: join(dir, 'no-such-program') })).to.equal(false);
  });
});
