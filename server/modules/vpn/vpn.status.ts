import { canTransition, transition } from './vpn-connection-state.js';
import { HANDSHAKE_ACTIVE_MS, type ConnectionStatus } from './vpn.constants.js';

/**
 * How a connection on an agent server follows its agent's reports (docs/vpn-servers.md, "Status of a connection on a
 * real server"): pure, so the transitions are tested with a fake clock.
 */

/** One peer of a report: what `wg show <if> dump` says of it. */
export interface PeerReport {
  /** Seconds since the peer's latest handshake, by the agent's clock; null when it never made one. */
  handshakeAgeSeconds: number | null;
  /** Bytes the server received from the peer (the client's upload) and sent to it (its download). */
  rxBytes: number;
  txBytes: number;
}

export interface ReportedState {
  status: ConnectionStatus;
  statusMessage?: string | null;
  connectedAt?: Date | null;
  lastActivity?: Date | null;
  lastHandshakeAt?: Date | null;
  uploadBytes: number;
  downloadBytes: number;
  reportedRx: number;
  reportedTx: number;
}

export const IDLE_MESSAGE = `No handshake from the client in the last ${HANDSHAKE_ACTIVE_MS / 1000} s`;
export const OFFLINE_MESSAGE = 'The server of this connection is not reporting (offline)';

/**
 * Applies one report to a connection (`peer` undefined: the interface does not hold it yet). Counters that went
 * down mean the peer was set again (or the agent restarted): what they show now is all new traffic. Returns the
 * event the change calls for, if any.
 */
export function applyPeerReport(
  c: ReportedState,
  peer: PeerReport | undefined,
  now: Date,
): 'connected' | 'disconnected' | null {
  if (peer) {
    const rx = peer.rxBytes >= c.reportedRx ? peer.rxBytes - c.reportedRx : peer.rxBytes;
    const tx = peer.txBytes >= c.reportedTx ? peer.txBytes - c.reportedTx : peer.txBytes;
    c.reportedRx = peer.rxBytes;
    c.reportedTx = peer.txBytes;
    c.uploadBytes += rx;
    c.downloadBytes += tx;
    if (peer.handshakeAgeSeconds !== null) {
      const at = new Date(now.getTime() - peer.handshakeAgeSeconds * 1000);
      if (!c.lastHandshakeAt || at > c.lastHandshakeAt) c.lastHandshakeAt = at;
    }
    if (rx + tx > 0) c.lastActivity = now;
    else if (c.lastHandshakeAt && (!c.lastActivity || c.lastHandshakeAt > c.lastActivity)) {
      c.lastActivity = c.lastHandshakeAt;
    }
  }
  return settleStatus(c, now);
}

/** The status the latest handshake calls for: `connecting` before any, `active` while recent, then `inactive`. */
export function settleStatus(c: ReportedState, now: Date): 'connected' | 'disconnected' | null {
  const hs = c.lastHandshakeAt ?? null;
  const next: ConnectionStatus = !hs
    ? 'connecting'
    : now.getTime() - hs.getTime() < HANDSHAKE_ACTIVE_MS
      ? 'active'
      : 'inactive';
  // A move the state machine does not have (none is known) leaves this connection as it is: one peer's odd report
  // must not fail the whole report of its server's agent.
  if (next === c.status || !canTransition(c.status, next)) return null;
  const was = c.status;
  transition(c, next);
  c.statusMessage = next === 'inactive' ? IDLE_MESSAGE : null;
  if (next === 'active') {
    c.connectedAt = hs;
    return 'connected';
  }
  c.connectedAt = null;
  return was === 'active' ? 'disconnected' : null;
}

/** The server stopped reporting: the connection says so (`error`); leaving `active` calls for `vpn.disconnected`. */
export function markUnreachable(c: ReportedState): 'disconnected' | null {
  if (c.status === 'error') return null;
  const was = c.status;
  transition(c, 'error');
  c.statusMessage = OFFLINE_MESSAGE;
  c.connectedAt = null;
  return was === 'active' ? 'disconnected' : null;
}
