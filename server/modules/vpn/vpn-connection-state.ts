import { conflict } from '../../lib/errors.js';
import { CONNECTION_STATUSES, type ConnectionStatus } from './vpn.constants.js';

/**
 * The life of a VPN connection (docs/vpn.md, "Connection states"): the one place that says which status may follow
 * which. Every write of a connection's status (the API, the activation job, agent reports and the offline sweep, the
 * removal of a server, the deletion of the organization) goes through {@link transition}, which refuses anything
 * else. A status may follow itself where the code writes it again: `inactive` when PUT status inactive drops the
 * peer of an idle connection on an agent server, `error` when the agent server of a connection in error is removed.
 */

export { CONNECTION_STATUSES, type ConnectionStatus };

/** Which status may follow which. */
export const VPN_CONNECTION_TRANSITIONS: Readonly<Record<ConnectionStatus, readonly ConnectionStatus[]>> = {
  connecting: ['active', 'inactive', 'error'],
  active: ['inactive', 'error'],
  inactive: ['connecting', 'active', 'inactive', 'error'],
  error: ['connecting', 'active', 'inactive', 'error'],
};

export function canTransition(from: ConnectionStatus, to: ConnectionStatus): boolean {
  return VPN_CONNECTION_TRANSITIONS[from].includes(to);
}

/** 409 CONFLICT ("The connection is <status>: it cannot become <to>") unless `c` may move to `to`; changes nothing. */
export function assertCanTransition(c: { status: ConnectionStatus }, to: ConnectionStatus): void {
  if (!canTransition(c.status, to)) throw conflict(`The connection is ${c.status}: it cannot become ${to}`);
}

/**
 * Moves `c` to `to`, or throws 409 CONFLICT when the state machine does not allow it. Only the status: each caller
 * sets the fields its move calls for (message, times, usage).
 */
export function transition(c: { status: ConnectionStatus }, to: ConnectionStatus): void {
  assertCanTransition(c, to);
  c.status = to;
}
