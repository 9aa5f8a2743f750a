import { conflict } from '../../lib/errors.js';
import { INVOICE_STATUSES, type InvoiceStatus } from './billing.constants.js';

/**
 * The life of an invoice (docs/billing.md, "States"): the one place that says which status may follow which. An
 * invoice is stored `open` (a `draft` is only a preview, never stored) and every later write of its status (paid,
 * void, uncollectible) goes through {@link transition}, which refuses anything else.
 */

export { INVOICE_STATUSES, type InvoiceStatus };

/** Which status may follow which; only an open invoice moves. */
export const INVOICE_TRANSITIONS: Readonly<Record<InvoiceStatus, readonly InvoiceStatus[]>> = {
  draft: [],
  open: ['paid', 'void', 'uncollectible'],
  paid: [],
  void: [],
  uncollectible: [],
};

/** Why a move to `to` is refused, worded for the caller (the 409's message follows "The invoice is <status>; "). */
const REFUSED: Record<InvoiceStatus, string> = {
  draft: 'an invoice cannot become a draft',
  open: 'an invoice cannot be opened again',
  paid: 'only open invoices can be paid',
  void: 'only open invoices can be voided',
  uncollectible: 'only open invoices can become uncollectible',
};

export function canTransition(from: InvoiceStatus, to: InvoiceStatus): boolean {
  return INVOICE_TRANSITIONS[from].includes(to);
}

/** 409 CONFLICT ("The invoice is <status>; …") unless `invoice` may move to `to`; changes nothing. */
export function assertCanTransition(invoice: { status: InvoiceStatus }, to: InvoiceStatus): void {
  if (!canTransition(invoice.status, to)) throw conflict(`The invoice is ${invoice.status}; ${REFUSED[to]}`);
}

/**
 * Moves `invoice` to `to`, or throws 409 CONFLICT when the state machine does not allow it. Only the status: each
 * caller sets the fields its move calls for (paid at, charge, next attempt).
 */
export function transition(invoice: { status: InvoiceStatus }, to: InvoiceStatus): void {
  assertCanTransition(invoice, to);
  invoice.status = to;
}
