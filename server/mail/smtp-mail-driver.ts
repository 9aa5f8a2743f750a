import nodemailer, { type Transporter } from 'nodemailer';
import type { MailDriver, MailMessage } from './mail-driver.js';

/**
 * Sends mail through an SMTP server (`MAIL_URL`: `smtp://user:pass@host:587` upgrades with STARTTLS when the server
 * offers it, `smtps://host:465` is TLS from the start), from `MAIL_FROM`. Connections are pooled and reused.
 */
export class SmtpMailDriver implements MailDriver {
  readonly name = 'smtp';
  private readonly transport: Transporter;

  constructor(private readonly options: { url: string; from: string }) {
    const url = new URL(options.url);
    this.transport = nodemailer.createTransport({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port ? Number(url.port) : url.protocol === 'smtps:' ? 465 : 587,
      secure: url.protocol === 'smtps:',
      ...(url.username
        ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } }
        : {}),
      pool: true,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
  }

  async send(message: MailMessage): Promise<void> {
    await this.transport.sendMail({
      from: this.options.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
      headers: { 'X-Mail-Kind': message.kind },
    });
  }

  close(): void {
    this.transport.close();
  }
}
