// Test tier: unit
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { Actor } from '../../../server/access/actor.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { openWebhookSecret } from '../../../server/modules/webhooks/webhook-secrets.js';
import { MAX_WEBHOOKS_PER_ORGANIZATION } from '../../../server/modules/webhooks/webhooks.constants.js';
import * as webhooks from '../../../server/modules/webhooks/webhooks.service.js';
import { InMemoryWebhooksRepository } from './in-memory-webhooks.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { appRejection, unitActor } from '../../support/unit.js';

/**
 * The webhooks service's use cases on webhooks against an in-memory repository (./in-memory-webhooks.repository.ts):
 * no server, no database.
 */

// A public address literal: the address rules pass it without a DNS lookup.
const URL = 'https://93.184.215.14/hooks';

interface Harness {
  deps: AppDeps;
  repo: InMemoryWebhooksRepository;
  nudges: number;
  clock: { t: number };
  ctx(actor: Actor): ActorContext;
}

function harness(): Harness {
  const repo = new InMemoryWebhooksRepository();
  const clock = { t: Date.parse('2026-11-01T00:00:00.000Z') };
  const h = { nudges: 0 };
  const deps = {
    config: { webhook: { allowPrivateTargets: false } },
    clock: { now: () => new Date(clock.t) },
    keys: { secrets: randomBytes(32) },
    modules: {
      webhooks: {
        repository: repo,
        deliveryWorker: { nudge: () => void (h.nudges += 1) },
      },
    },
  } as unknown as AppDeps;
  return {
    deps,
    repo,
    clock,
    get nudges() {
      return h.nudges;
    },
    ctx: (actor) => ({ em: NO_EM, deps, actor, requestId: 'req', ip: '127.0.0.1', userAgent: undefined }),
  };
}

const actor = (organizationId?: string): Actor => unitActor({ organizationId });

describe('webhooks service (in-memory repository)', () => {
  it('creates a webhook with its secret shown once in full and stored sealed, and lists it masked', async () => {
    const h = harness();
    const owner = actor();
    const created = await webhooks.createWebhook(h.ctx(owner), {
      url: URL,
      events: ['vpn.connected', 'vpn.connected'],
    } as never);
    const secret = created.webhook.secret;
    expect(secret).to.match(/^whsec_/);
    expect(created.webhook.events).to.deep.equal(['vpn.connected']);
    expect(created.webhook.status).to.equal('active');
    const stored = h.repo.webhooks[0]!;
    expect(stored.secret).to.not.equal(secret);
    expect(openWebhookSecret(h.deps, stored.secret)).to.equal(secret);

    const list = await webhooks.listWebhooks(h.ctx(owner));
    expect(list.total).to.equal(1);
    expect(list.webhooks[0]!.secret).to.not.equal(secret);
    expect(list.webhooks[0]!.delivery_stats).to.deep.equal({ successful: 0, failed: 0, last_30_days: 0 });
  });

  it("refuses another organization's webhook and a malformed id as not found", async () => {
    const h = harness();
    const owner = actor();
    const { webhook } = await webhooks.createWebhook(h.ctx(owner), {
      url: URL,
      events: ['vpn.connected'],
    } as never);
    const stranger = await appRejection(webhooks.getWebhook(h.ctx(actor()), webhook.id));
    expect(stranger.code).to.equal('NOT_FOUND');
    expect(stranger.message).to.match(/^Webhook not found/);
    expect((await appRejection(webhooks.getWebhook(h.ctx(owner), 'nope'))).code).to.equal('NOT_FOUND');
  });

  it(`refuses a webhook beyond ${MAX_WEBHOOKS_PER_ORGANIZATION} per organization with 409`, async () => {
    const h = harness();
    const owner = actor();
    for (let i = 0; i < MAX_WEBHOOKS_PER_ORGANIZATION; i++) {
      await webhooks.createWebhook(h.ctx(owner), { url: URL, events: ['vpn.connected'] } as never);
    }
    const err = await appRejection(
      webhooks.createWebhook(h.ctx(owner), { url: URL, events: ['vpn.connected'] } as never),
    );
    expect(err.code).to.equal('CONFLICT');
    expect(h.repo.webhooks).to.have.length(MAX_WEBHOOKS_PER_ORGANIZATION);
  });

  it('refuses a private URL with 400 and stores nothing', async () => {
    const h = harness();
    const err = await appRejection(
      webhooks.createWebhook(h.ctx(actor()), {
        url: 'https://10.0.0.1/x',
        events: ['vpn.connected'],
      } as never),
    );
    expect(err.code).to.equal('VALIDATION_ERROR');
    expect(h.repo.webhooks).to.deep.equal([]);
  });

  it('enabling a webhook again ends its run of failures; redelivery needs it active', async () => {
    const h = harness();
    const owner = actor();
    const { webhook } = await webhooks.createWebhook(h.ctx(owner), {
      url: URL,
      events: ['vpn.connected'],
      active: false,
    } as never);
    const hook = h.repo.webhooks[0]!;
    const original = h.repo.createDelivery(NO_EM, {
      id: 'del_original',
      webhook: hook,
      organizationId: owner.organizationId,
      eventId: 'evt_1',
      eventType: 'vpn.connected',
      payload: '{"id":"evt_1"}',
      status: 'failed',
      attempts: 3,
      nextAttemptAt: null,
      fairAt: new Date(h.clock.t),
      createdAt: new Date(h.clock.t),
      updatedAt: new Date(h.clock.t),
    });
    const refused = await appRejection(
      webhooks.redeliver(h.ctx(owner), { id: webhook.id, delivery_id: original.id }),
    );
    expect(refused.code).to.equal('CONFLICT');

    hook.failingSince = new Date(h.clock.t);
    h.clock.t += 1000;
    const updated = await webhooks.updateWebhook(h.ctx(owner), { id: webhook.id, active: true });
    expect(updated.webhook.status).to.equal('active');
    expect(hook.failingSince).to.equal(null);

    const { delivery } = await webhooks.redeliver(h.ctx(owner), {
      id: webhook.id,
      delivery_id: original.id,
    });
    expect(delivery).to.include({ event_id: 'evt_1', status: 'pending', redelivery_of: original.id });
    expect(h.nudges).to.equal(1);
    expect(
      (await webhooks.getWebhook(h.ctx(owner), webhook.id)).webhook.delivery_stats.total_deliveries,
    ).to.equal(2);
  });

  it('deletes a webhook with its deliveries', async () => {
    const h = harness();
    const owner = actor();
    const { webhook } = await webhooks.createWebhook(h.ctx(owner), {
      url: URL,
      events: ['vpn.connected'],
    } as never);
    await webhooks.deleteWebhook(h.ctx(owner), webhook.id);
    expect(h.repo.webhooks).to.deep.equal([]);
    expect((await appRejection(webhooks.getWebhook(h.ctx(owner), webhook.id))).code).to.equal('NOT_FOUND');
  });
});
