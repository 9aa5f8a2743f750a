// Test tier: unit
import { expect } from 'chai';
import {
  canTransition,
  DELIVERY_STATUSES,
  movesSql,
  statusesBefore,
  statusListSql,
  transition,
  WEBHOOK_DELIVERY_TRANSITIONS,
  type DeliveryStatus,
} from '../../../server/modules/webhooks/webhook-delivery-state.js';

describe('the webhook delivery state machine (webhook-delivery-state.ts)', () => {
  it('a pending delivery is retried, succeeds or fails; success and failed are final', () => {
    const allowed = DELIVERY_STATUSES.flatMap((from) =>
      DELIVERY_STATUSES.filter((to) => canTransition(from, to)).map((to) => `${from}>${to}`),
    );
    expect(allowed).to.deep.equal(['pending>pending', 'pending>success', 'pending>failed']);
    expect(Object.keys(WEBHOOK_DELIVERY_TRANSITIONS)).to.have.members([...DELIVERY_STATUSES]);
  });

  it('sets an allowed status, and throws on any other, changing nothing', () => {
    const d = { status: 'pending' as DeliveryStatus };
    transition(d, 'pending');
    transition(d, 'success');
    expect(d.status).to.equal('success');
    expect(() => transition(d, 'failed')).to.throw(
      'A webhook delivery cannot move from success to failed (WEBHOOK_DELIVERY_TRANSITIONS)',
    );
    expect(d.status).to.equal('success');
  });

  it('gives the SQL guards of the status updates from the table', () => {
    expect(statusesBefore('failed')).to.deep.equal(['pending']);
    expect(statusesBefore('pending')).to.deep.equal(['pending']);
    expect(statusListSql(statusesBefore('failed'))).to.equal("('pending')");
    expect(movesSql()).to.equal("(('pending', 'pending'), ('pending', 'success'), ('pending', 'failed'))");
  });
});
