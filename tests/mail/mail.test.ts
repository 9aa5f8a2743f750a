// Test tier: server
import { Writable } from 'node:stream';
import { expect } from 'chai';
import pino from 'pino';
import { testConfig } from '../support/env.js';
import { createOrg, uniqueEmail } from '../support/factories.js';
import { http } from '../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { startSmtpSink, type SmtpSink } from '../support/smtp.js';

/** A logger at `info` whose lines are kept. */
function capturingLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

const tokenOf = (link: string) => new URL(link).searchParams.get('token')!;

describe('outgoing mail (docs/configuration.md, "Configuration": MAIL_URL)', function () {
  this.timeout(60_000);

  describe('without MAIL_URL: the log driver', () => {
    let s: TestServer;
    const captured = capturingLogger();
    before(async () => {
      s = await startTestServer({ log: captured.log, env: { LOG_LEVEL: 'info' } });
    });
    after(async () => {
      await s?.close();
    });

    it('logs an invitation with its recipient, subject and redacted link, never its token', async () => {
      const owner = await createOrg(s.deps);
      const email = uniqueEmail('logged');
      const res = await http(s.baseUrl, 'POST', '/v1/users', { token: owner.token, body: { email } });
      expect(res.status).to.equal(201);
      const line = captured.lines.map((l) => JSON.parse(l)).find((l) => l.mail?.to === email);
      expect(line, 'the mail line').to.not.equal(undefined);
      expect(line.mail).to.deep.equal({
        to: email,
        subject: line.mail.subject,
        kind: 'invitation',
        link: `${s.deps.config.publicBaseUrl}/accept-invitation?token=[redacted]`,
      });
      expect(line.mail.subject).to.match(/invited/);
      const all = captured.lines.join('\n');
      expect(all).to.not.match(/uit_/);
      expect(all).to.not.match(/Choose a password/);
    });
  });

  describe('with MAIL_URL: SMTP', () => {
    let s: TestServer;
    let smtp: SmtpSink;
    const captured = capturingLogger();
    // On PostgreSQL a database of its own: the reset mail is sent by a job, which another test server on the run's
    // database (with another mail driver) could otherwise take.
    let scratch: ScratchDatabase | undefined;
    before(async () => {
      smtp = await startSmtpSink();
      scratch = await ownPostgresDatabase('mail_smtp');
      s = await startTestServer({
        config: testConfig({
          DATABASE_URL: scratch?.url ?? process.env.DATABASE_URL,
          MAIL_URL: smtp.url,
          MAIL_FROM: 'Platform <no-reply@example.test>',
          LOG_LEVEL: 'info',
        }),
        log: captured.log,
      });
    });
    after(async () => {
      await s?.close();
      await smtp?.close();
      await scratch?.drop();
    });

    it('sends the invitation over SMTP (authenticated, from MAIL_FROM); its link activates the account', async () => {
      const owner = await createOrg(s.deps);
      const email = uniqueEmail('smtp');
      const res = await http(s.baseUrl, 'POST', '/v1/users', { token: owner.token, body: { email } });
      expect(res.status).to.equal(201);
      expect(res.body.invitation_url).to.equal(null);
      const mail = await smtp.waitFor((m) => m.to.includes(email));
      expect(mail.from).to.equal('no-reply@example.test');
      expect(mail.raw).to.match(/^From: Platform <no-reply@example\.test>/m);
      expect(mail.subject).to.match(/invited/);
      const link = /(https?:\/\/\S+\/accept-invitation\?token=\S+)/.exec(mail.text)?.[1];
      expect(link, mail.text).to.be.a('string');
      const accepted = await http(s.baseUrl, 'POST', '/v1/auth/invitations/accept', {
        body: { token: tokenOf(link!), password: 'smtp-password-1' },
      });
      expect(accepted.status).to.equal(200);
      // Nothing of the mail in the log: the SMTP driver logs no message.
      expect(captured.lines.join('\n')).to.not.match(/uit_/);
    });

    it('sends the password-reset mail over SMTP; its token sets the new password', async () => {
      const owner = await createOrg(s.deps);
      const res = await http(s.baseUrl, 'POST', '/v1/auth/password-reset', { body: { email: owner.email } });
      expect(res.status).to.equal(202);
      const mail = await smtp.waitFor((m) => m.to.includes(owner.email));
      expect(mail.subject).to.equal('Reset your password');
      const link = /(https?:\/\/\S+\/reset-password\?token=\S+)/.exec(mail.text)?.[1];
      expect(link, mail.text).to.be.a('string');
      const confirmed = await http(s.baseUrl, 'POST', '/v1/auth/password-reset/confirm', {
        body: { token: tokenOf(link!), new_password: 'reset-over-smtp' },
      });
      expect(confirmed.status).to.equal(200);
      const login = await http(s.baseUrl, 'POST', '/v1/auth/login', {
        body: { email: owner.email, password: 'reset-over-smtp' },
      });
      expect(login.status).to.equal(200);
      expect(captured.lines.join('\n')).to.not.match(/pwr_/);
    });
  });
});
