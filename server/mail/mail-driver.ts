import type { Logger } from 'pino';

/** One message to one recipient. Plain text: the service sends links, not layouts. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** What the message is for (`invitation`), for drivers that route or tag messages. */
  kind: string;
}

/**
 * Where outgoing mail goes. A real transport (SMTP, an email API) implements this; the service ships the log
 * driver, which writes each message to the log so that a local installation needs no mail server.
 */
export interface MailDriver {
  readonly name: string;
  send(message: MailMessage): Promise<void>;
}

/** The default driver: each message becomes one `info` log line (recipient, subject and text). */
export class LogMailDriver implements MailDriver {
  readonly name = 'log';
  constructor(private readonly log: Pick<Logger, 'info'>) {}

  async send(message: MailMessage): Promise<void> {
    this.log.info(
      { mail: { to: message.to, subject: message.subject, kind: message.kind, text: message.text } },
      `mail to ${message.to}: ${message.subject}`,
    );
  }
}

/** Keeps messages in memory (tests, scripts). */
export class MemoryMailDriver implements MailDriver {
  readonly name = 'memory';
  readonly sent: MailMessage[] = [];

  async send(message: MailMessage): Promise<void> {
    this.sent.push(message);
  }
}
