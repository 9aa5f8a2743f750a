// Test tier: unit
import { expect } from 'chai';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS } from '../../../server/config.js';
import { nextRetryDelayMs } from '../../../server/modules/webhooks/retry-schedule.js';
import {
  deliveryHeaders,
  maskSecret,
  newWebhookSecret,
} from '../../../server/modules/webhooks/webhook-signing.js';

describe('webhook signing and retry schedule', () => {
  it('makes whsec_ secrets of 32 random bytes and masks them to the last four characters', () => {
    const a = newWebhookSecret();
    const b = newWebhookSecret();
    expect(a).to.not.equal(b);
    expect(a).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(a.slice(6), 'base64')).to.have.length(32);
    expect(maskSecret(a)).to.equal(`whsec_****${a.slice(-4)}`);
  });

  it('signs exactly as the third-party libraries do', async () => {
    const secret = newWebhookSecret();
    const body = Buffer.from('{"id":"evt_1","type":"user.created","data":{"object":{"name":"Zoë ✓"}}}');
    const timestamp = Math.floor(Date.now() / 1000);
    const h = deliveryHeaders({
      secret,
      body,
      messageId: 'evt_1',
      timestamp,
      eventType: 'user.created',
      deliveryId: 'del_1',
      attempt: 1,
    });
    expect(h['x-vpn-signature']).to.equal(await githubSign(secret, body.toString('utf8')));
    expect(h['webhook-signature']).to.equal(
      new StandardWebhook(secret).sign('evt_1', new Date(timestamp * 1000), body.toString('utf8')),
    );
    expect(h).to.include({
      'content-type': 'application/json',
      'x-vpn-event': 'user.created',
      'x-vpn-delivery': 'del_1',
      'webhook-id': 'evt_1',
      'webhook-timestamp': String(timestamp),
    });
  });

  it('allows N + 1 attempts for N delays, each delay within ±10 %', () => {
    const schedule = DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS;
    expect(schedule).to.have.length(9);
    for (let attempt = 1; attempt <= schedule.length; attempt++) {
      const base = schedule[attempt - 1]!;
      expect(nextRetryDelayMs(schedule, attempt, () => 0)).to.equal(Math.round(base * 0.9));
      expect(nextRetryDelayMs(schedule, attempt, () => 0.5)).to.equal(base);
      expect(nextRetryDelayMs(schedule, attempt, () => 0.999999)).to.be.at.most(Math.round(base * 1.1));
    }
    expect(nextRetryDelayMs(schedule, schedule.length + 1)).to.equal(undefined);
    expect(nextRetryDelayMs([1000, 2000], 3)).to.equal(undefined);
    // About three days in all.
    const total = schedule.reduce((a, b) => a + b, 0);
    expect(total / 3_600_000).to.be.within(71, 73);
  });
});
