import { conflict } from '../../lib/errors.js';
import { DEPLOYMENT_STATUSES, type DeploymentStatus } from './hosting.constants.js';

/**
 * The life of a deployment (docs/hosting.md, "Inside the module"): the one place that says which status may follow
 * which. Services (deploy, cancel) and the build chain (builds.service.ts, process-builds.ts) change a status only
 * through {@link transition}, which refuses anything else.
 *
 *     queued ──▶ building ──▶ success
 *       │           ├───────▶ failed
 *       └───────────┴───────▶ canceled
 */

export { DEPLOYMENT_STATUSES, type DeploymentStatus };

/** Statuses a deployment is still on its way in (the site's build queue; what a restart resumes). */
export const UNFINISHED_STATUSES = ['queued', 'building'] as const satisfies readonly DeploymentStatus[];
/** Statuses a deployment never leaves. */
export const FINAL_STATUSES = [
  'success',
  'failed',
  'canceled',
] as const satisfies readonly DeploymentStatus[];
export type FinalDeploymentStatus = (typeof FINAL_STATUSES)[number];

/** Which status may follow which; a final status has none. */
export const DEPLOYMENT_TRANSITIONS: Readonly<Record<DeploymentStatus, readonly DeploymentStatus[]>> = {
  queued: ['building', 'canceled'],
  building: ['success', 'failed', 'canceled'],
  success: [],
  failed: [],
  canceled: [],
};

/** Why a move to `to` is refused, worded for the caller (the 409's message follows "The deployment is <status>: "). */
const REFUSED: Record<DeploymentStatus, string> = {
  queued: 'it cannot be queued again',
  building: 'only a queued one can start building',
  success: 'only a building one can succeed',
  failed: 'only a building one can fail',
  canceled: 'only a queued or building one can be canceled',
};

export function canTransition(from: DeploymentStatus, to: DeploymentStatus): boolean {
  return DEPLOYMENT_TRANSITIONS[from].includes(to);
}

export function isFinal(status: DeploymentStatus): status is FinalDeploymentStatus {
  return (FINAL_STATUSES as readonly DeploymentStatus[]).includes(status);
}

/** What a transition changes on a deployment (the entity, or any object with these fields). */
export interface DeploymentState {
  status: DeploymentStatus;
  statusMessage?: string | null;
  startedAt?: Date | null;
  completedAt?: Date | null;
  updatedAt: Date;
}

/** 409 CONFLICT ("The deployment is <status>: …") unless `d` may move to `to`; changes nothing. */
export function assertCanTransition(d: { status: DeploymentStatus }, to: DeploymentStatus): void {
  if (!canTransition(d.status, to)) throw conflict(`The deployment is ${d.status}: ${REFUSED[to]}`);
}

/**
 * Moves `d` to `to` at `now`, or throws 409 CONFLICT ("The deployment is <status>: …") when the state machine does
 * not allow it. Starting to build sets `startedAt`; a final status sets `completedAt` and the reason (`statusMessage`,
 * at most 500 characters).
 */
export function transition(
  d: DeploymentState,
  to: DeploymentStatus,
  now: Date,
  reason: string | null = null,
): void {
  assertCanTransition(d, to);
  d.status = to;
  d.updatedAt = now;
  if (to === 'building') d.startedAt = now;
  if (isFinal(to)) {
    d.statusMessage = reason ? reason.slice(0, 500) : null;
    d.completedAt = now;
  }
}

/** A deployment a rollback may make live again: a success (anything else: 409). */
export function assertCanGoLive(d: { status: DeploymentStatus }): void {
  if (d.status !== 'success') {
    throw conflict(`The deployment is ${d.status}: only a successful deployment can be made live again`);
  }
}
