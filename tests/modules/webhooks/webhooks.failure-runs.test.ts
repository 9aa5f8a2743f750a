// Test tier: server
import { expect } from 'chai';
import { newId } from '../../../server/lib/ids.js';
import { recordOutcomes, type OutcomeInput } from '../../../server/modules/webhooks/delivery-attempt.js';
import { WebhookDelivery } from '../../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../../server/modules/webhooks/webhook.entity.js';
import { createOrg } from '../../support/factories.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createWebhook } from './webhook-helpers.js';

/**
 * A webhook's run of failed attempts (`failing_since`, docs/webhooks.md) when the outcomes of concurrent attempts
 * are recorded out of order: a success recorded after a later attempt's failure does not end the run that failure
 * began.
 */
describe('webhooks: runs of failures recorded out of order', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** A pending delivery at its first attempt, due far in the future so that no worker takes it. */
  async function pendingDelivery(webhookId: string, organizationId: string): Promise<string> {
    const em = s.deps.db.orm.em.fork();
    const id = newId('del');
    const far = new Date(Date.now() + 365 * 24 * 3600 * 1000);
    await em.insert(WebhookDelivery, {
      id,
      webhook: webhookId,
      organizationId,
      eventId: newId('evt'),
      eventType: 'user.updated',
      payload: '{}',
      status: 'pending',
      attempts: 1,
      nextAttemptAt: far,
      fairAt: far,
      createdAt: new Date(),
      updatedAt: new Date(),
    });
    return id;
  }

  const outcome = (webhookId: string, deliveryId: string, success: boolean, at: Date): OutcomeInput => ({
    target: { deliveryId, webhookId, attempt: 1 },
    outcome: {
      success,
      gone: false,
      responseStatus: success ? 200 : 500,
      responseTimeMs: 5,
      error: null,
      at,
    },
  });
  /**
   * The attempts' times: a year ahead, so the retries their failures schedule fall due long after the test and no
   * worker makes a real attempt of its own in between (one recorded after a test's success would start a run).
   */
  const at = (offsetMs: number) => new Date(Date.UTC(new Date().getUTCFullYear() + 1, 5, 1, 10) + offsetMs);
  const failingSince = async (id: string) =>
    (await s.deps.db.orm.em.fork().findOneOrFail(Webhook, id)).failingSince?.toISOString() ?? null;

  it('keeps the run of a later failure when an earlier success is recorded after it', async () => {
    const owner = await createOrg(s.deps);
    const wh = await createWebhook(s, owner, 'https://127.0.0.1:9/hook', ['user.updated']);
    const [ok, bad] = [
      await pendingDelivery(wh.id, owner.organizationId),
      await pendingDelivery(wh.id, owner.organizationId),
    ];
    const t1 = at(0);
    const t2 = at(5000);

    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, bad, false, t2)]);
    expect(await failingSince(wh.id)).to.equal(t2.toISOString());
    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, ok, true, t1)]);
    expect(await failingSince(wh.id)).to.equal(t2.toISOString());
  });

  it('ends a run that began before the success, whatever the order', async () => {
    const owner = await createOrg(s.deps);
    const wh = await createWebhook(s, owner, 'https://127.0.0.1:9/hook', ['user.updated']);
    const [bad, ok, later] = [
      await pendingDelivery(wh.id, owner.organizationId),
      await pendingDelivery(wh.id, owner.organizationId),
      await pendingDelivery(wh.id, owner.organizationId),
    ];
    const t0 = at(-60000);
    const t1 = at(0);
    const t2 = at(5000);

    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, bad, false, t0)]);
    expect(await failingSince(wh.id)).to.equal(t0.toISOString());
    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, ok, true, t1)]);
    expect(await failingSince(wh.id)).to.equal(null);
    // A batch with a success and a later failure: the run starts at that failure.
    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, later, false, t2)]);
    expect(await failingSince(wh.id)).to.equal(t2.toISOString());
  });

  it('in one batch of a success and a later failure, keeps the earlier start of a failure after that success stored first', async () => {
    const owner = await createOrg(s.deps);
    const wh = await createWebhook(s, owner, 'https://127.0.0.1:9/hook', ['user.updated']);
    const [stored, ok, bad] = [
      await pendingDelivery(wh.id, owner.organizationId),
      await pendingDelivery(wh.id, owner.organizationId),
      await pendingDelivery(wh.id, owner.organizationId),
    ];
    const t1 = at(0);
    const t2 = at(2000);
    const t3 = at(9000);

    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [outcome(wh.id, stored, false, t2)]);
    await recordOutcomes(s.deps, s.deps.db.orm.em.fork(), [
      outcome(wh.id, ok, true, t1),
      outcome(wh.id, bad, false, t3),
    ]);
    // The run began with the first failure after the last success: t2, not the batch's own t3.
    expect(await failingSince(wh.id)).to.equal(t2.toISOString());
  });
});
