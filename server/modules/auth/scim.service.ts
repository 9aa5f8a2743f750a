import { loadOrganizationView } from '../../access/organization.dto.js';
import { organizationUpdated } from '../../access/organization.events.js';
import { initialPermissions } from '../../access/permissions.js';
import { loadUserDetail, toUserDetailDto, toUserSummaryDto } from '../../access/user.dto.js';
import { userCreated, userDeleted, userUpdated } from '../../access/user.events.js';
import type { User } from '../../access/user.entity.js';
import type { Em } from '../../db/orm.js';
import type { AuditActor } from '../../events/audit.js';
import type { ActorContext, AppDeps } from '../../kit/deps.js';
import { assertPlanFeature } from '../../kit/plan-limit.js';
import { randomToken, sha256Hex } from '../../lib/crypto.js';
import { notFound } from '../../lib/errors.js';
import { isId, newId } from '../../lib/ids.js';
import { PLANS, type PlanId } from '../../lib/plans.js';
import { authRepositoryOf } from './auth.repository.js';
import {
  applyPatch,
  modelFromBody,
  nameOf,
  parseFilter,
  SCIM_MAX_RESULTS,
  scimBadRequest,
  ScimError,
  type ScimUserModel,
  type ScimUserView,
} from './scim-protocol.js';
import { scimRepositoryOf, type ScimRepository, type ScimUserFilter } from './scim.repository.js';
import type { ScimUser } from './scim.entity.js';
import type { TScimTokenOutput } from './scim.schema.js';
import { ssoRepositoryOf } from './sso.repository.js';

/**
 * SCIM provisioning (docs/sso.md, "SCIM provisioning"): the owner's token, and the organization's users as the
 * identity provider reads and writes them. Each change makes the same rows, events and revocations as the same
 * change through `/v1/users` (users.service.ts): `user.created`, `user.updated` (a suspension revoking the user's
 * sessions, refresh tokens and API keys at once), `user.deleted` (the user's resources moved to the owner). The owner
 * is listed, never changed.
 */

/** The base URL of the SCIM API. */
export const scimBaseUrl = (deps: AppDeps) => `${deps.config.publicBaseUrl}/scim/v2`;

const NO_ACTIVITY = { vpn_connections: 0, databases_created: 0, api_calls_30d: 0 };

/** Whether the plan includes SCIM (the Enterprise plan, with single sign-on). */
const planHasScim = (plan: string) => PLANS[plan as PlanId].features.sso === true;

// ---------- the token ----------

/** `POST /organization/scim-token` (owner, Enterprise): a new token, shown once, replacing the previous one. */
export async function createScimToken(ctx: ActorContext): Promise<TScimTokenOutput> {
  const { deps, actor } = ctx;
  assertPlanFeature(actor, 'sso');
  const token = randomToken('scim_', 256);
  const repository = scimRepositoryOf(deps);
  const now = deps.clock.now();
  await repository.transaction(ctx.em, async (tx) => {
    const org = await repository.lockOrganizationShared(tx, actor.organizationId);
    if (!org) throw notFound('Organization');
    assertPlanFeature(org, 'sso');
    await repository.replaceToken(tx, {
      organizationId: org.id,
      tokenHash: sha256Hex(token),
      createdBy: actor.userId,
      now,
    });
    repository.recordEvent(tx, organizationUpdated, await loadOrganizationView(tx, org), org.id, now);
  });
  return { success: true, scim: { token, base_url: scimBaseUrl(deps), created_at: now.toISOString() } };
}

// ---------- who calls ----------

/** The organization a SCIM request acts on, and who its changes are audited as (the token's maker). */
export interface ScimCaller {
  organizationId: string;
  auditActor: AuditActor;
}

const unauthorizedScim = () =>
  new ScimError(
    401,
    'A valid SCIM token is required: Authorization: Bearer <token of POST /v1/organization/scim-token>',
  );

/**
 * The caller of a SCIM request from its `Authorization` header: 401 without the organization's current token (or
 * when the organization is deleted); 403 when the organization's plan no longer includes single sign-on and SCIM.
 */
export async function authenticateScim(
  deps: AppDeps,
  authorization: string | undefined,
): Promise<ScimCaller> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) throw unauthorizedScim();
  const repository = scimRepositoryOf(deps);
  const em = repository.fork();
  const row = await repository.findToken(em, sha256Hex(m[1]!));
  if (!row || row.organization.deletedAt) throw unauthorizedScim();
  const org = row.organization;
  if (!planHasScim(org.plan)) {
    throw new ScimError(
      403,
      'SCIM provisioning needs the Enterprise plan: the organization’s owner can upgrade with PUT /v1/billing/subscription',
    );
  }
  const maker = await repository.findUser(em, org.id, row.createdBy);
  const owner = maker ?? (await repository.ownerOf(em, org.id));
  return {
    organizationId: org.id,
    auditActor: {
      type: 'user',
      id: owner?.id ?? row.createdBy,
      email: owner?.email ?? null,
      organizationId: org.id,
    },
  };
}

// ---------- users ----------

function viewOf(user: User, fields: ScimUser | undefined): ScimUserView {
  const lastModified =
    fields && fields.updatedAt.getTime() > user.updatedAt.getTime() ? fields.updatedAt : user.updatedAt;
  return {
    id: user.id,
    userName: user.email,
    displayName: user.name,
    givenName: fields?.givenName ?? null,
    familyName: fields?.familyName ?? null,
    formatted: user.name,
    email: user.email,
    externalId: fields?.externalId ?? null,
    active: user.status !== 'suspended',
    created: user.createdAt,
    lastModified,
  };
}

const userNotFound = (id: string) => new ScimError(404, `User ${id} not found`);

const ownerUntouchable = () =>
  new ScimError(
    403,
    'The organization’s owner is not managed by SCIM: it is listed read-only, and changed only through the API',
  );

async function viewById(repository: ScimRepository, em: Em, organizationId: string, id: string) {
  const user = isId('usr', id) ? await repository.findUser(em, organizationId, id) : null;
  if (!user) throw userNotFound(id);
  const fields = await repository.fieldsOf(em, [user.id]);
  return viewOf(user, fields.get(user.id));
}

/** `GET /Users`: the organization's users (every one, SCIM-made or not, the owner included), oldest first. */
export async function listScimUsers(
  deps: AppDeps,
  caller: ScimCaller,
  query: { filter?: string; startIndex?: string; count?: string },
): Promise<{ total: number; startIndex: number; users: ScimUserView[] }> {
  const startIndex = Math.max(1, positiveInt(query.startIndex, 'startIndex') ?? 1);
  const count = Math.min(SCIM_MAX_RESULTS, positiveInt(query.count, 'count') ?? SCIM_MAX_RESULTS);
  const parsed = query.filter !== undefined && query.filter.trim() !== '' ? parseFilter(query.filter) : {};
  const repository = scimRepositoryOf(deps);
  const em = repository.fork();
  if (parsed === null) return { total: 0, startIndex, users: [] };
  const filter: ScimUserFilter = {};
  if (parsed.id !== undefined) {
    if (!isId('usr', parsed.id)) return { total: 0, startIndex, users: [] };
    filter.id = parsed.id;
  }
  if (parsed.userName !== undefined) filter.email = parsed.userName;
  if (parsed.externalId !== undefined) filter.externalId = parsed.externalId;
  if (parsed.active !== undefined) filter.statuses = parsed.active ? ['active', 'invited'] : ['suspended'];
  const page = await repository.listUsers(em, caller.organizationId, filter, startIndex - 1, count);
  const fields = await repository.fieldsOf(
    em,
    page.users.map((u) => u.id),
  );
  return { total: page.total, startIndex, users: page.users.map((u) => viewOf(u, fields.get(u.id))) };
}

function positiveInt(value: string | undefined, name: string): number | undefined {
  if (value === undefined || value === '') return undefined;
  if (!/^-?\d{1,9}$/.test(value)) throw scimBadRequest('invalidValue', `${name} must be an integer`);
  return Math.max(0, Number(value));
}

/** `GET /Users/{id}`. */
export function getScimUser(deps: AppDeps, caller: ScimCaller, id: string): Promise<ScimUserView> {
  const repository = scimRepositoryOf(deps);
  return viewById(repository, repository.fork(), caller.organizationId, id);
}

const taken = () =>
  new ScimError(
    409,
    'A user with this userName already exists: in this organization (find it with filter=userName eq "…"), or as ' +
      'the account of another organization',
    'uniqueness',
  );

/** A unique index refused the write (SQLSTATE 23505). */
function isUniqueViolation(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if ((e as Error & { code?: unknown }).code === '23505' || e.name === 'UniqueConstraintViolationException')
      return true;
  }
  return false;
}

/** The organization, share-locked, still on a plan with SCIM (a downgrade between the check and the change). */
async function lockOrganization(repository: ScimRepository, tx: Em, organizationId: string) {
  const org = await repository.lockOrganizationShared(tx, organizationId);
  if (!org || org.deletedAt) throw unauthorizedScim();
  if (!planHasScim(org.plan)) {
    throw new ScimError(403, 'SCIM provisioning needs the Enterprise plan');
  }
  return org;
}

/**
 * `POST /Users`: a new active (or, with `active: false`, suspended) user of the organization with the SSO
 * connection's `default_role` (`member` without a connection) and no password; it signs in through single sign-on.
 */
export async function createScimUser(
  deps: AppDeps,
  caller: ScimCaller,
  body: unknown,
): Promise<ScimUserView> {
  const model = modelFromBody(body, true);
  checkEmail(model, model.userName);
  const repository = scimRepositoryOf(deps);
  const auth = authRepositoryOf(deps);
  const em = repository.fork();
  const connection = await ssoRepositoryOf(deps).findConnection(em, caller.organizationId);
  const role = connection?.defaultRole ?? 'member';
  try {
    return await repository.transaction(em, async (tx) => {
      const org = await lockOrganization(repository, tx, caller.organizationId);
      const now = deps.clock.now();
      if (
        (await repository.emailInOrganization(tx, org.id, model.userName)) ||
        (await repository.accountElsewhere(tx, org.id, model.userName))
      ) {
        throw taken();
      }
      const user = auth.createUser(tx, {
        id: newId('usr'),
        organization: org,
        email: model.userName,
        name: nameOf(model),
        passwordHash: null,
        role,
        status: model.active ? 'active' : 'suspended',
        permissions: initialPermissions(role),
      });
      await repository.flush(tx);
      await repository.saveFields(tx, user, model, now);
      repository.recordEvent(tx, userCreated, toUserDetailDto(user, NO_ACTIVITY), org.id, now);
      const fields = await repository.fieldsOf(tx, [user.id]);
      return viewOf(user, fields.get(user.id));
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw taken();
    throw err;
  }
}

/** The address of a user cannot change: `userName` and the primary email must stay what they are. */
function checkEmail(model: ScimUserModel, email: string): void {
  if (model.userName !== email) {
    throw new ScimError(
      400,
      'userName is the user’s email address and cannot change: create a user for the new address',
      'mutability',
    );
  }
  if (model.email !== null && model.email !== email) {
    throw new ScimError(400, 'emails must hold the userName only', 'mutability');
  }
}

/** `PUT /Users/{id}`: the user as the body says (`active` left out keeps its value). */
export function replaceScimUser(deps: AppDeps, caller: ScimCaller, id: string, body: unknown) {
  return changeUser(deps, caller, id, (current) => {
    const m = modelFromBody(body, current.active);
    return m;
  });
}

/** `PATCH /Users/{id}`: a PatchOp body's operations, as Okta and Microsoft Entra ID send them. */
export function patchScimUser(deps: AppDeps, caller: ScimCaller, id: string, body: unknown) {
  return changeUser(deps, caller, id, (current) => applyPatch(current, body));
}

/**
 * A change of a user: the new model from the current one, then the user row (name, status) and the directory's
 * fields. A suspension revokes the user's sessions (so their refresh tokens) and API keys in the same transaction,
 * as `PUT /v1/users/{id} {status: "suspended"}` does; `user.updated` when the user's view changed.
 */
async function changeUser(
  deps: AppDeps,
  caller: ScimCaller,
  id: string,
  next: (current: ScimUserModel) => ScimUserModel,
): Promise<ScimUserView> {
  const repository = scimRepositoryOf(deps);
  const auth = authRepositoryOf(deps);
  return repository.transaction(repository.fork(), async (tx) => {
    await lockOrganization(repository, tx, caller.organizationId);
    const user = isId('usr', id) ? await repository.findUser(tx, caller.organizationId, id, true) : null;
    if (!user) throw userNotFound(id);
    if (user.role === 'owner') throw ownerUntouchable();
    const now = deps.clock.now();
    const before = (await repository.fieldsOf(tx, [user.id])).get(user.id);
    const current = viewOf(user, before);
    const wanted = next({ ...current, formatted: null });
    checkEmail(wanted, user.email);
    let changed = false;
    // A PATCH of `name.formatted` alone names the user by it.
    const name = nameOf(
      wanted.displayName === current.displayName && wanted.formatted !== null
        ? { ...wanted, displayName: null }
        : wanted,
    );
    if (name !== user.name) {
      user.name = name;
      changed = true;
    }
    if (wanted.active !== current.active) {
      if (user.status === 'invited') {
        throw new ScimError(
          409,
          'The user has not accepted their invitation yet: delete the user to withdraw it',
        );
      }
      user.status = wanted.active ? 'active' : 'suspended';
      if (!wanted.active) {
        await auth.revokeSessionsOf(tx, user.id, null, now);
        await repository.revokeApiKeys(tx, user.id, now);
      }
      changed = true;
    }
    const fieldsChanged =
      !before ||
      wanted.externalId !== current.externalId ||
      wanted.givenName !== current.givenName ||
      wanted.familyName !== current.familyName;
    if (changed) await repository.flush(tx);
    if (fieldsChanged) await repository.saveFields(tx, user, wanted, now);
    if (changed) {
      repository.recordEvent(
        tx,
        userUpdated,
        await loadUserDetail(tx, deps.registry.ownedResources, user, now),
        caller.organizationId,
        now,
      );
    }
    const after = (await repository.fieldsOf(tx, [user.id])).get(user.id);
    return viewOf(user, after);
  });
}

/**
 * `DELETE /Users/{id}`: the user is removed as `DELETE /v1/users/{id}` removes one: its resources moved to the
 * owner, its sessions and API keys revoked, `user.deleted`.
 */
export async function deleteScimUser(deps: AppDeps, caller: ScimCaller, id: string): Promise<void> {
  const repository = scimRepositoryOf(deps);
  const auth = authRepositoryOf(deps);
  await repository.transaction(repository.fork(), async (tx) => {
    await lockOrganization(repository, tx, caller.organizationId);
    const user = isId('usr', id) ? await repository.findUser(tx, caller.organizationId, id, true) : null;
    if (!user) throw userNotFound(id);
    if (user.role === 'owner') throw ownerUntouchable();
    const owner = await repository.ownerOf(tx, caller.organizationId);
    const now = deps.clock.now();
    await deps.registry.ownedResources.transfer(tx, {
      organizationId: caller.organizationId,
      fromUserId: user.id,
      toUserId: owner!.id,
    });
    await auth.revokeSessionsOf(tx, user.id, null, now);
    await repository.revokeApiKeys(tx, user.id, now);
    await repository.deleteFields(tx, user.id);
    const dto = toUserSummaryDto(user);
    user.deletedAt = now;
    repository.recordEvent(tx, userDeleted, dto, caller.organizationId, now);
  });
}
