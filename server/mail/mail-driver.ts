import type { Logger } from 'pino';

/** One message to one recipient. Plain text: the service sends links, not layouts. */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** What the message is for (`invitation`, `password_reset`), for drivers that route or tag messages. */
  kind: string;
  /**
   * The link the text carries when it grants something (an invitation, a password reset), token included. Drivers
   * that deliver send it within `text`; the log driver shows it only redacted.
   */
  link?: string;
}

/**
 * Where outgoing mail goes: SMTP with `MAIL_URL` (smtp-mail-driver.ts), else the log driver, which writes a line per
 * message without its text so that a local installation needs no mail server (refused in production).
 */
export interface MailDriver {
  readonly name: string;
  send(message: MailMessage): Promise<void>;
  /** Closes what the driver keeps open (SMTP connections), at shutdown. */
  close?(): Promise<void> | void;
}

/** `link` with every query value replaced, so that a token it carries never reaches a log. */
export function redactLink(link: string): string {
  try {
    const url = new URL(link);
    const params = [...url.searchParams.keys()].map((k) => `${encodeURIComponent(k)}=[redacted]`);
    return `${url.origin}${url.pathname}${params.length ? `?${params.join('&')}` : ''}`;
  } catch {
    return '[redacted]';
  }
}

/**
 * The default driver outside production: each message becomes one `info` log line with the recipient, the subject,
 * its kind and its link redacted. The text is never logged: it holds the link's token (docs/configuration.md, "Configuration").
 */
export class LogMailDriver implements MailDriver {
  readonly name = 'log';
  constructor(private readonly log: Pick<Logger, 'info'>) {}

  async send(message: MailMessage): Promise<void> {
    this.log.info(
      {
        mail: {
          to: message.to,
          subject: message.subject,
          kind: message.kind,
          ...(message.link !== undefined ? { link: redactLink(message.link) } : {}),
        },
      },
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
