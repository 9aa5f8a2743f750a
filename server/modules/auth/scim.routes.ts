import { runAudited, settleAudit, type AuditScope } from '../../events/audit.js';
import type { AppDeps } from '../../kit/deps.js';
import type { ModuleHttpAnswer, ModuleHttpRoute } from '../../kit/module.js';
import type { AppError } from '../../lib/errors.js';
import {
  ENTERPRISE_USER_SCHEMA,
  LIST_SCHEMA,
  SCIM_MEDIA_TYPE,
  scimErrorBody,
  ScimError,
  serviceProviderConfig,
  USER_SCHEMA,
  userResource,
  userResourceType,
  userSchema,
  type ScimUserView,
} from './scim-protocol.js';
import {
  authenticateScim,
  createScimUser,
  deleteScimUser,
  getScimUser,
  listScimUsers,
  patchScimUser,
  replaceScimUser,
  scimBaseUrl,
  type ScimCaller,
} from './scim.service.js';
import { scimRepositoryOf } from './scim.repository.js';

/**
 * SCIM 2.0 at `/scim/v2` (docs/sso.md, "SCIM provisioning"): the organization's token as the bearer, SCIM's own
 * bodies and error body (`application/scim+json`), `ETag` and `Location` headers. Changes of users are audited as
 * the same changes through `/v1/users` are (`users.create`, `users.update`, `users.delete`), in the name of the
 * owner who made the token.
 */

const PREFIX = '/scim/v2';
const CONTENT_TYPE = `${SCIM_MEDIA_TYPE}; charset=utf-8`;
/** SCIM clients send `application/scim+json`; `application/json` is read as well (RFC 7644 §3.1). */
const JSON_MEDIA_TYPES = [SCIM_MEDIA_TYPE];

type Request = Parameters<ModuleHttpRoute['handler']>[1];

function answer(status: number, body: unknown, headers: Record<string, string> = {}): ModuleHttpAnswer {
  return {
    status,
    contentType: CONTENT_TYPE,
    body: body === undefined ? '' : JSON.stringify(body),
    headers: { 'Cache-Control': 'no-store', ...headers },
  };
}

function errorAnswer(status: number, detail: string, scimType?: string): ModuleHttpAnswer {
  return answer(
    status,
    scimErrorBody(status, detail, scimType),
    status === 401 ? { 'WWW-Authenticate': 'Bearer realm="SCIM"' } : {},
  );
}

/** Errors met outside a SCIM use case (a body that is not JSON, a media type refused), in SCIM's error body. */
function appErrorAnswer(err: AppError): ModuleHttpAnswer {
  const scimType = err.status === 400 ? 'invalidSyntax' : undefined;
  const detail = err.code === 'INTERNAL_ERROR' ? 'Internal server error' : err.message;
  return errorAnswer(err.status, detail, scimType);
}

function userAnswer(status: number, view: ScimUserView, baseUrl: string): ModuleHttpAnswer {
  const { resource, etag } = userResource(view, baseUrl);
  return answer(status, resource, {
    ETag: etag,
    ...(status === 201 ? { Location: `${baseUrl}/Users/${view.id}` } : {}),
  });
}

const stringParam = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** Runs a SCIM request: the caller from its token, then `work`; a ScimError is answered in SCIM's error body. */
function scim(
  work: (deps: AppDeps, caller: ScimCaller, req: Request) => Promise<ModuleHttpAnswer>,
): ModuleHttpRoute['handler'] {
  return async (deps, req) => {
    try {
      const caller = await authenticateScim(deps, req.authorization);
      return await work(deps, caller, req);
    } catch (err) {
      if (err instanceof ScimError) return errorAnswer(err.status, err.detail, err.scimType);
      throw err;
    }
  };
}

/**
 * A change of a user in its audit scope (server/events/audit.ts), as the procedure of `/v1/users` that makes the same
 * change is: the entry is written in the change's transaction, and a refusal (403, 409) gets one with its status.
 */
async function audited<T>(
  deps: AppDeps,
  req: Request,
  caller: ScimCaller,
  action: string,
  userId: string | undefined,
  successStatus: number,
  work: () => Promise<T>,
  createdId?: (result: T) => string,
): Promise<T> {
  if (!deps.config.auditLogEnabled) return work();
  const scope: AuditScope = {
    action,
    actor: caller.auditActor,
    target: userId && userId.startsWith('usr_') ? { type: 'user', id: userId } : undefined,
    request: { requestId: req.requestId, ip: req.ip, userAgent: req.userAgent },
    successStatus,
    now: () => deps.clock.now(),
    entryId: undefined,
  };
  const settle = async (status: number, target?: { type: string; id: string }) => {
    try {
      await settleAudit(scimRepositoryOf(deps).fork(), scope, status, target);
    } catch (err) {
      deps.log.error({ err, requestId: req.requestId, action }, 'could not write the audit entry');
    }
  };
  let result: T;
  try {
    result = await runAudited(scope, work);
  } catch (err) {
    await settle(err instanceof ScimError ? err.status : 500);
    throw err;
  }
  await settle(successStatus, createdId ? { type: 'user', id: createdId(result) } : undefined);
  return result;
}

const userId = (req: Request) => req.params.id ?? '';

const discovery = (deps: AppDeps) => {
  const base = scimBaseUrl(deps);
  return {
    base,
    resourceTypes: [userResourceType(base)],
    schemas: [userSchema(base)],
  };
};

const listOf = (resources: unknown[]) => ({
  schemas: [LIST_SCHEMA],
  totalResults: resources.length,
  startIndex: 1,
  itemsPerPage: resources.length,
  Resources: resources,
});

const routes: Omit<ModuleHttpRoute, 'prefix' | 'jsonMediaTypes' | 'errorAnswer'>[] = [
  {
    method: 'GET',
    path: '/ServiceProviderConfig',
    handler: scim(async (deps) =>
      answer(
        200,
        serviceProviderConfig(scimBaseUrl(deps), `${deps.config.publicBaseUrl}/docs/guides/sso.md`),
      ),
    ),
  },
  {
    method: 'GET',
    path: '/ResourceTypes',
    handler: scim(async (deps) => answer(200, listOf(discovery(deps).resourceTypes))),
  },
  {
    method: 'GET',
    path: '/ResourceTypes/:id',
    handler: scim(async (deps, _caller, req) => {
      const found = discovery(deps).resourceTypes.find((r) => r.id === req.params.id);
      if (!found) throw new ScimError(404, `Resource type ${req.params.id} not found: this API serves User`);
      return answer(200, found);
    }),
  },
  {
    method: 'GET',
    path: '/Schemas',
    handler: scim(async (deps) => answer(200, listOf(discovery(deps).schemas))),
  },
  {
    method: 'GET',
    path: '/Schemas/:id',
    handler: scim(async (deps, _caller, req) => {
      const found = discovery(deps).schemas.find((s) => s.id === req.params.id);
      if (!found) {
        const detail =
          req.params.id === ENTERPRISE_USER_SCHEMA
            ? 'The enterprise extension is not kept: its attributes are ignored'
            : `Schema ${req.params.id} not found: this API serves ${USER_SCHEMA}`;
        throw new ScimError(404, detail);
      }
      return answer(200, found);
    }),
  },
  {
    method: 'GET',
    path: '/Users',
    handler: scim(async (deps, caller, req) => {
      const base = scimBaseUrl(deps);
      const page = await listScimUsers(deps, caller, {
        filter: stringParam(req.query.filter),
        startIndex: stringParam(req.query.startIndex),
        count: stringParam(req.query.count),
      });
      const resources = page.users.map((u) => userResource(u, base).resource);
      return answer(200, {
        schemas: [LIST_SCHEMA],
        totalResults: page.total,
        startIndex: page.startIndex,
        itemsPerPage: resources.length,
        Resources: resources,
      });
    }),
  },
  {
    method: 'POST',
    path: '/Users',
    handler: scim(async (deps, caller, req) => {
      const view = await audited(
        deps,
        req,
        caller,
        'users.create',
        undefined,
        201,
        () => createScimUser(deps, caller, req.body),
        (v) => v.id,
      );
      return userAnswer(201, view, scimBaseUrl(deps));
    }),
  },
  {
    method: 'GET',
    path: '/Users/:id',
    handler: scim(async (deps, caller, req) =>
      userAnswer(200, await getScimUser(deps, caller, userId(req)), scimBaseUrl(deps)),
    ),
  },
  {
    method: 'PUT',
    path: '/Users/:id',
    handler: scim(async (deps, caller, req) => {
      const view = await audited(deps, req, caller, 'users.update', userId(req), 200, () =>
        replaceScimUser(deps, caller, userId(req), req.body),
      );
      return userAnswer(200, view, scimBaseUrl(deps));
    }),
  },
  {
    method: 'PATCH',
    path: '/Users/:id',
    handler: scim(async (deps, caller, req) => {
      const view = await audited(deps, req, caller, 'users.update', userId(req), 200, () =>
        patchScimUser(deps, caller, userId(req), req.body),
      );
      return userAnswer(200, view, scimBaseUrl(deps));
    }),
  },
  {
    method: 'DELETE',
    path: '/Users/:id',
    handler: scim(async (deps, caller, req) => {
      await audited(deps, req, caller, 'users.delete', userId(req), 204, () =>
        deleteScimUser(deps, caller, userId(req)),
      );
      return { status: 204, contentType: CONTENT_TYPE, body: '', headers: { 'Cache-Control': 'no-store' } };
    }),
  },
  // Every other path (Groups, Bulk, /Me, ...): SCIM's 404.
  ...(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).map((method) => ({
    method,
    path: '/*',
    handler: scim(async () => {
      throw new ScimError(404, `No SCIM endpoint here: this API serves ${PREFIX}/Users`);
    }),
  })),
];

/** The SCIM API's routes (the auth manifest's `httpRoutes`). */
export const scimHttpRoutes: ModuleHttpRoute[] = routes.map((r) => ({
  ...r,
  prefix: PREFIX,
  jsonMediaTypes: JSON_MEDIA_TYPES,
  errorAnswer: (err: AppError) => appErrorAnswer(err),
}));
