import { expect } from 'chai';
import type { Em } from '../../../server/db/orm.js';
import { newId } from '../../../server/lib/ids.js';
import type { Webhook } from '../../../server/modules/webhooks/webhook.entity.js';
import type { DeliveryStatus } from '../../../server/modules/webhooks/webhooks.constants.js';
import type { WebhooksRepository } from '../../../server/modules/webhooks/webhooks.repository.js';
import type { ContractWorld } from '../../support/repository-contract.js';

/** What the webhooks contract runs against: a repository and the rows it refers to. */
export interface WebhooksContractSubject {
  repo: WebhooksRepository;
  world: ContractWorld;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const time = (v: Date | string | null | undefined) => (v ? new Date(v).getTime() : null);

/**
 * The behaviour of a {@link WebhooksRepository} the webhooks service relies on for webhooks and their deliveries
 * (docs/adding-a-module.md, "Checklist", step 3), run against the MikroORM repository on the test database and the
 * in-memory one of the unit tests (tests/modules/webhooks/webhooks.repository-contract.test.ts). The delivery worker's
 * statements (claims, outcomes, retention) are SQL only and are not kept in memory.
 */
export function describeWebhooksRepositoryContract(
  label: string,
  make: () => Promise<WebhooksContractSubject>,
): void {
  describe(`WebhooksRepository contract: ${label}`, () => {
    let s: WebhooksContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    function createWebhook(tx: Em, organizationId: string, seconds: number): Webhook {
      return s.repo.createWebhook(tx, {
        id: newId('wh'),
        organizationId,
        url: `https://93.184.215.14/hooks/${seconds}`,
        events: ['vpn.connected'],
        description: null,
        secret: 'sealed-secret',
        status: 'active',
        now: at(seconds),
      });
    }

    async function webhook(organizationId: string, seconds: number): Promise<string> {
      return s.repo.transaction(s.repo.fork(), async (tx) => createWebhook(tx, organizationId, seconds).id);
    }

    async function delivery(
      organizationId: string,
      webhookId: string,
      seconds: number,
      opts: { status?: DeliveryStatus; eventType?: string; responseTimeMs?: number } = {},
    ): Promise<string> {
      const id = newId('del');
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const hook = await s.repo.findWebhook(tx, organizationId, webhookId);
        const status = opts.status ?? 'pending';
        s.repo.createDelivery(tx, {
          id,
          webhook: hook!,
          organizationId,
          eventId: newId('evt'),
          eventType: opts.eventType ?? 'vpn.connected',
          payload: `{"n":${seconds}}`,
          status,
          attempts: status === 'pending' ? 0 : 1,
          nextAttemptAt: status === 'pending' ? at(seconds) : null,
          fairAt: at(seconds),
          lastAttemptAt: status === 'pending' ? null : at(seconds),
          deliveredAt: status === 'success' ? at(seconds) : null,
          responseStatus: status === 'pending' ? null : status === 'success' ? 200 : 500,
          responseTimeMs: opts.responseTimeMs ?? null,
          createdAt: at(seconds),
          updatedAt: at(seconds),
        });
      });
      return id;
    }

    it("finds, lists (newest first) and counts an organization's webhooks, never another organization's", async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const [w1, w2] = await s.repo.transaction(s.repo.fork(), async (tx) => [
        createWebhook(tx, a.organizationId, 1).id,
        createWebhook(tx, a.organizationId, 2).id,
      ]);
      const wb = await webhook(b.organizationId, 3);
      const em = s.repo.fork();

      const found = await s.repo.findWebhook(em, a.organizationId, w1);
      expect(found).to.include({
        id: w1,
        url: 'https://93.184.215.14/hooks/1',
        status: 'active',
        failingSince: null,
      });
      expect(found!.organization.id).to.equal(a.organizationId);
      expect(found!.events).to.deep.equal(['vpn.connected']);
      expect(time(found!.createdAt)).to.equal(at(1).getTime());
      expect(await s.repo.findWebhook(em, b.organizationId, w1)).to.equal(null);
      expect((await s.repo.listWebhooks(em, a.organizationId)).map((w) => w.id)).to.deep.equal([w2, w1]);
      expect((await s.repo.listWebhooks(em, b.organizationId)).map((w) => w.id)).to.deep.equal([wb]);
      expect(await s.repo.countWebhooks(em, a.organizationId)).to.equal(2);
      expect(await s.repo.countWebhooks(em, b.organizationId)).to.equal(1);
    });

    it('saves the changes to a webhook read in a unit of work', async () => {
      const a = await s.world.organization();
      const id = await webhook(a.organizationId, 1);
      const em = s.repo.fork();
      const hook = await s.repo.findWebhook(em, a.organizationId, id);
      hook!.status = 'inactive';
      hook!.events = ['vpn.connected', 'vpn.disconnected'];
      await s.repo.save(em);

      const again = await s.repo.findWebhook(s.repo.fork(), a.organizationId, id);
      expect(again).to.include({ status: 'inactive' });
      expect(again!.events).to.deep.equal(['vpn.connected', 'vpn.disconnected']);
    });

    it('lists a webhook’s deliveries newest first, by status and event type, with the total and a cursor', async () => {
      const a = await s.world.organization();
      const w = await webhook(a.organizationId, 0);
      const other = await webhook(a.organizationId, 0);
      const d1 = await delivery(a.organizationId, w, 1, { status: 'success' });
      const d2 = await delivery(a.organizationId, w, 2, { status: 'failed', eventType: 'vpn.disconnected' });
      const d3 = await delivery(a.organizationId, w, 3);
      await delivery(a.organizationId, other, 4);
      const list = (filter: { status?: DeliveryStatus; eventType?: string }, limit = 10, after?: string) =>
        s.repo.listDeliveries(s.repo.fork(), { webhookId: w, ...filter }, { limit, starting_after: after });
      const ids = (p: { items: { id: string }[] }) => p.items.map((d) => d.id);

      const all = await list({});
      expect(ids(all)).to.deep.equal([d3, d2, d1]);
      expect(all).to.include({ total: 3, has_more: false });
      expect(all.items[0]).to.include({ status: 'pending', eventType: 'vpn.connected', payload: '{"n":3}' });
      expect(ids(await list({ status: 'failed' }))).to.deep.equal([d2]);
      expect(ids(await list({ eventType: 'vpn.connected' }))).to.deep.equal([d3, d1]);
      const first = await list({}, 2);
      expect(ids(first)).to.deep.equal([d3, d2]);
      expect(first).to.include({ total: 3, has_more: true });
      const next = await list({}, 2, d2);
      expect(ids(next)).to.deep.equal([d1]);
      expect(next.has_more).to.equal(false);

      const found = await s.repo.findDelivery(s.repo.fork(), w, d2);
      expect(found).to.include({ id: d2, status: 'failed', payload: '{"n":2}', responseStatus: 500 });
      expect(await s.repo.findDelivery(s.repo.fork(), other, d2)).to.equal(null);
    });

    it('sums each webhook’s deliveries (counts, latest times, average response time)', async () => {
      const a = await s.world.organization();
      const w = await webhook(a.organizationId, 0);
      const quiet = await webhook(a.organizationId, 0);
      await delivery(a.organizationId, w, 10, { status: 'success', responseTimeMs: 100 });
      await delivery(a.organizationId, w, 20, { status: 'success', responseTimeMs: 300 });
      await delivery(a.organizationId, w, 30, { status: 'failed' });
      await delivery(a.organizationId, w, 40);

      const stats = await s.repo.deliveryStats(s.repo.fork(), [w, quiet], at(15));
      expect([...stats.keys()]).to.deep.equal([w]);
      const row = stats.get(w)!;
      expect([row.total, row.successful, row.failed, row.last_30_days].map(Number)).to.deep.equal([
        4, 2, 1, 3,
      ]);
      expect([row.last_delivery, row.last_successful, row.last_failed].map(time)).to.deep.equal([
        at(30).getTime(),
        at(20).getTime(),
        at(30).getTime(),
      ]);
      expect(Number(row.avg_ms)).to.equal(200);
      expect((await s.repo.deliveryStats(s.repo.fork(), [], at(0))).size).to.equal(0);
    });

    it('deletes a webhook with its deliveries, and nothing else', async () => {
      const a = await s.world.organization();
      const gone = await webhook(a.organizationId, 1);
      const kept = await webhook(a.organizationId, 2);
      const d1 = await delivery(a.organizationId, gone, 3);
      const d2 = await delivery(a.organizationId, kept, 4);

      await s.repo.transaction(s.repo.fork(), (tx) => s.repo.deleteWebhook(tx, gone));
      const em = s.repo.fork();
      expect(await s.repo.findWebhook(em, a.organizationId, gone)).to.equal(null);
      expect(await s.repo.findDelivery(em, gone, d1)).to.equal(null);
      expect((await s.repo.findDelivery(em, kept, d2))?.id).to.equal(d2);
      expect(await s.repo.countWebhooks(em, a.organizationId)).to.equal(1);
    });
  });
}
