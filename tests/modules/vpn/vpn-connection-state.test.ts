// Test tier: unit
import { expect } from 'chai';
import { refusal } from '../../support/refusal.js';
import {
  canTransition,
  CONNECTION_STATUSES,
  transition,
  VPN_CONNECTION_TRANSITIONS,
  type ConnectionStatus,
} from '../../../server/modules/vpn/vpn-connection-state.js';
import { markUnreachable, settleStatus } from '../../../server/modules/vpn/vpn.status.js';

describe('the VPN connection state machine (vpn-connection-state.ts)', () => {
  it('allows exactly the moves the code makes', () => {
    const allowed = CONNECTION_STATUSES.flatMap((from) =>
      CONNECTION_STATUSES.filter((to) => canTransition(from, to)).map((to) => `${from}>${to}`),
    );
    expect(allowed).to.deep.equal([
      'connecting>active',
      'connecting>inactive',
      'connecting>error',
      'active>inactive',
      'active>error',
      'inactive>connecting',
      'inactive>active',
      'inactive>inactive',
      'inactive>error',
      'error>connecting',
      'error>active',
      'error>inactive',
      'error>error',
    ]);
    expect(Object.keys(VPN_CONNECTION_TRANSITIONS)).to.have.members([...CONNECTION_STATUSES]);
  });

  it('sets an allowed status, and refuses any other with a 409, changing nothing', () => {
    const c = { status: 'connecting' as ConnectionStatus };
    transition(c, 'active');
    expect(c.status).to.equal('active');
    const e = refusal(() => transition(c, 'connecting'));
    expect(e.status).to.equal(409);
    expect(e.code).to.equal('CONFLICT');
    expect(e.message).to.equal('The connection is active: it cannot become connecting');
    expect(c.status).to.equal('active');
    refusal(() => transition(c, 'active'));
    transition(c, 'inactive');
    expect(c.status).to.equal('inactive');
  });

  it('agent reports move a connection through it; a move it does not have leaves that connection as it is', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    // An active connection whose handshake went missing would go back to connecting: not a move of the machine.
    // It stays active, and the rest of its agent's report goes on (one odd peer never fails a server's report).
    const odd = {
      status: 'active' as ConnectionStatus,
      lastHandshakeAt: null,
      uploadBytes: 0,
      downloadBytes: 0,
      reportedRx: 0,
      reportedTx: 0,
    };
    expect(settleStatus(odd, now)).to.equal(null);
    expect(odd.status).to.equal('active');
    const c = {
      status: 'inactive' as ConnectionStatus,
      lastHandshakeAt: new Date(now.getTime() - 1000),
      uploadBytes: 0,
      downloadBytes: 0,
      reportedRx: 0,
      reportedTx: 0,
    };
    expect(settleStatus(c, now)).to.equal('connected');
    expect(c.status).to.equal('active');
    expect(markUnreachable(c)).to.equal('disconnected');
    expect(c.status).to.equal('error');
  });
});
