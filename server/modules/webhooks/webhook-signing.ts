import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** `whsec_` + the standard base64 of 32 random bytes (docs/webhooks.md, "Webhooks"; the Standard Webhooks secret format). */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** `whsec_****abcd`: what every response but the create one shows. */
export function maskSecret(secret: string): string {
  return `${SECRET_PREFIX}****${secret.slice(-4)}`;
}

export interface SignInput {
  secret: string;
  /** The exact bytes sent. */
  body: Buffer;
  /** `webhook-id`: the event id, the same on every retry, so receivers can drop duplicates. */
  messageId: string;
  /** Unix seconds of this attempt (`webhook-timestamp`). */
  timestamp: number;
}

/**
 * `X-VPN-Signature: sha256=<hex>`: HMAC-SHA256 of the body keyed by the whole secret string, as GitHub-style
 * receivers (`@octokit/webhooks-methods`) check it.
 */
export function vpnSignature(secret: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * `webhook-signature: v1,<base64>`: HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` keyed by the
 * base64-decoded bytes after `whsec_` (Standard Webhooks).
 */
export function standardSignature({ secret, body, messageId, timestamp }: SignInput): string {
  const key = Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
  const mac = createHmac('sha256', key).update(`${messageId}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

/**
 * Every header of a delivery attempt (docs/webhooks.md, "Webhooks"). During a rotation's overlap (`previousSecret` set) the
 * new secret keys `X-VPN-Signature`, the old one `X-VPN-Signature-Previous`, and `webhook-signature` lists both,
 * new first (`v1,<new> v1,<old>`): a receiver holding either secret verifies.
 */
export function deliveryHeaders(
  input: SignInput & {
    eventType: string;
    deliveryId: string;
    attempt: number;
    previousSecret?: string | null;
    /** A test delivery (`POST /webhooks/:id/test`): `X-VPN-Test: true`. */
    test?: boolean;
  },
): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'CloudPlatform-Webhooks/1.0',
    'x-vpn-signature': vpnSignature(input.secret, input.body),
    'x-vpn-event': input.eventType,
    'x-vpn-delivery': input.deliveryId,
    'x-vpn-delivery-attempt': String(input.attempt),
    'webhook-id': input.messageId,
    'webhook-timestamp': String(input.timestamp),
    'webhook-signature': standardSignature(input),
  };
  if (input.test) headers['x-vpn-test'] = 'true';
  if (input.previousSecret) {
    headers['x-vpn-signature-previous'] = vpnSignature(input.previousSecret, input.body);
    headers['webhook-signature'] += ` ${standardSignature({ ...input, secret: input.previousSecret })}`;
  }
  return headers;
}
