import type { AnyTRPCRouter } from '@trpc/server';
import type { EntityName, MigrationObject } from '@mikro-orm/core';
import type { OwnedResource } from '../access/owned-resources.js';
import type { Config } from '../config.js';
import type { AnyEventDefinition } from '../events/define-event.js';
import type { OutboxHandler } from '../events/outbox.js';
import type { Em } from '../db/orm.js';
import type { AppError } from '../lib/errors.js';
import type { AtRestColumn } from './at-rest.js';
import type { AppDeps } from './deps.js';
import type { AnyModuleJob } from './jobs.js';
import type { UsageCounter, UsageReporter } from './usage.js';

/** A migration as the migrator lists it; `name` orders them across modules (`Migration<yyyymmddNNNNNN>_<what>`). */
export type MigrationEntry = MigrationObject;

/**
 * A long-running loop of a module (claims its own rows rather than queue jobs). Started after the job queue. A worker
 * that services reach (to nudge it) is built by the module's `create` and started here from `deps.modules.<m>`.
 */
export interface ModuleWorker {
  name: string;
  start(deps: AppDeps): Promise<RunningWorker>;
}

export interface RunningWorker {
  /** Finishes the current step and stops. */
  stop(): Promise<void>;
}

/** Consumes committed events (server/events/outbox.ts), in the relay's transaction. */
export interface OutboxConsumer {
  name: string;
  handle: OutboxHandler;
  /** After a batch the relay committed (e.g. wake the worker that delivers what `handle` wrote). */
  afterCommit?(deps: AppDeps): void;
}

/**
 * Called inside the transaction that creates an organization (server/kit/organization-hooks.ts), so that what a
 * module keeps per organization (billing's subscription) exists exactly when the organization does.
 */
export type OrganizationCreatedHook = (
  tx: Em,
  organization: { id: string },
  now: Date,
  deps: AppDeps,
) => Promise<void>;

/**
 * Called inside the transaction that deletes an organization (`DELETE /organization`), after it is marked deleted:
 * what must happen at once (VPN connections disconnected, the subscription canceled with its final invoice), with
 * its events recorded in `tx` so that they still reach the organization's webhooks.
 */
export type OrganizationDeletedHook = (
  tx: Em,
  organization: { id: string },
  now: Date,
  deps: AppDeps,
) => Promise<void>;

/**
 * One table's share of an organization's rows, removed in batches by the organization's deletion job
 * (server/kit/organization-hooks.ts).
 */
export interface OrganizationRowsStep {
  table: string;
  /**
   * SQL condition on the table's columns that selects the organization's rows, with one `?` for the organization
   * id; `"organization_id" = ?` when absent. Rows of tables without the column are reached through their parent
   * (`"site_id" in (select "id" from "hosting_sites" where "organization_id" = ?)`).
   */
  where?: string;
}

/**
 * How a module's rows of an organization are removed when the organization is deleted. Every table of the
 * module's entities is in `remove` or in `keep` (tests/kit/modules.test.ts), and every table with an
 * `organization_id` column in `remove` (tests/modules/organization/organization.deletion.test.ts).
 */
export interface OrganizationRows {
  /** In order, children before their parents. The manifests run in server/modules.ts order, the core's last. */
  remove: readonly OrganizationRowsStep[];
  /** Tables of the module that hold nothing of any organization, with the reason. */
  keep?: Readonly<Record<string, string>>;
  /**
   * True while the module still has work to finish for the organization before its rows can go (the webhooks'
   * first attempt at the events the deletion caused). Removal waits for it, at most ORGANIZATION_SETTLE_MAX_MS.
   */
  busy?(em: Em, organizationId: string): Promise<boolean>;
}

/** What a module's HTTP route answers (ModuleHttpRoute). */
export interface ModuleHttpAnswer {
  contentType: string;
  body: string | Buffer;
  headers?: Record<string, string>;
  status?: number;
}

/**
 * A route that is not a procedure: something other than JSON (an HTML page, a PDF) that needs no bearer token (the
 * handler checks whatever the URL carries, a signed token), or a protocol with a token and answers of its own (the
 * VPN agent's, docs/vpn-servers.md; SCIM's under `/scim/v2`, docs/sso.md). Registered by server/app.ts; errors
 * thrown as AppError are answered in the usual envelope unless the route answers them itself (`errorAnswer`). Not a
 * procedure, so not served on `/trpc` nor listed in the OpenAPI document.
 */
export interface ModuleHttpRoute {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Where the route lives: `/v1` unless set (a protocol of its own: `/scim/v2`). */
  prefix?: string;
  /** Under `prefix`, with `:param` segments (`/billing/invoices/:id/pdf`), or ending in `*` (every other path). */
  path: string;
  /**
   * Takes `application/x-www-form-urlencoded` bodies too (an HTML form's POST: the SAML ACS), parsed into `body` as
   * an object of strings (the first value of a repeated name). Every other route refuses them (415).
   */
  form?: boolean;
  /**
   * Further media types whose bodies are JSON, parsed as `application/json` is (`application/scim+json`). Every
   * other route refuses them (415).
   */
  jsonMediaTypes?: readonly string[];
  /**
   * How the route answers an error (thrown by `handler`, or met reading the request: a body that is not JSON, a
   * media type refused): a protocol's own error body (SCIM's). The API's envelope when absent.
   */
  errorAnswer?(err: AppError, requestId: string): ModuleHttpAnswer;
  handler(
    deps: AppDeps,
    request: {
      params: Record<string, string>;
      query: Record<string, string | undefined>;
      /** The `Authorization` header, for routes that check a token of their own (the VPN agent's). */
      authorization: string | undefined;
      /** The parsed JSON body of a POST, PUT or PATCH (`{}` when empty). */
      body: unknown;
      /** Aborts when the client goes away (a long poll stops waiting). */
      signal: AbortSignal;
      /** The request's id (`X-Request-Id`), its client address (as TRUST_PROXY gives it) and user agent. */
      requestId: string;
      ip: string;
      userAgent: string | undefined;
    },
  ): Promise<ModuleHttpAnswer>;
}

/**
 * Everything a module brings, in one place (docs/adding-a-module.md). The process derives its lists from the
 * modules' manifests (server/modules.ts): the ORM's entities and migrations, the queue's jobs, the workers it starts
 * and stops, the events a webhook may subscribe to and their payload schemas, the resources a user owns, and the
 * counters of the plan features.
 */
export interface ModuleManifest<Name extends string = string, Runtime = unknown> {
  /** The module's name; for a module with a router, its key in server/router.ts; its key in `deps.modules`. */
  name: Name;
  /**
   * Builds what the module keeps per process, once at start (server/services.ts, after the database, the queue and
   * the rest of `deps` exist, before jobs and workers start): its drivers, chosen from `config`, its in-process hubs,
   * the workers its services nudge. Services read it as `deps.modules.<name>` (typed from server/modules.ts). A plain
   * object, so that a test can override a piece of it (`startTestServer({ modules: { <name>: { driver } } })`).
   */
  create?: (deps: AppDeps, config: Config) => Runtime | Promise<Runtime>;
  /**
   * Releases what `create` opened (a driver's connection pools) when the process stops, after the job queue (no job
   * uses it any more) and before the database closes.
   */
  stop?(runtime: Runtime): Promise<void>;
  /** The tRPC router of the module, if it serves procedures (checked against server/router.ts by a test). */
  router?: AnyTRPCRouter;
  /**
   * Further routers of the module, each mounted in server/router.ts under its own key (auth's `sso`: `client.sso.get()`
   * rather than `client.auth.sso.get()`); checked like `router`.
   */
  routers?: Readonly<Record<string, AnyTRPCRouter>>;
  /** MikroORM entities (defineEntity classes). */
  entities?: readonly EntityName[];
  migrations?: readonly MigrationEntry[];
  jobs?: readonly AnyModuleJob[];
  workers?: readonly ModuleWorker[];
  /** The events the module emits (their names are in server/events/event-types.ts). */
  events?: readonly AnyEventDefinition[];
  outboxConsumers?: readonly OutboxConsumer[];
  /** Tables of rows that belong to a user: moved when the user is deleted, counted in their activity. */
  ownedResources?: readonly OwnedResource[];
  /**
   * Entities with a reference to a user that are not owned resources, each with the reason (a test requires every
   * entity referencing a user to be one or the other).
   */
  notOwnedByUser?: Readonly<Record<string, string>>;
  /** The plan features this module counts (for plan limits and billing). */
  usage?: readonly UsageCounter[];
  /** What the module contributes to the usage report and to invoices (server/kit/usage.ts). */
  usageReport?: UsageReporter;
  /** Runs in the transaction that creates an organization. */
  onOrganizationCreated?: OrganizationCreatedHook;
  /** Runs in the transaction that deletes an organization. */
  onOrganizationDeleted?: OrganizationDeletedHook;
  /** How the module's rows of a deleted organization are removed (required of a module with entities). */
  organizationRows?: OrganizationRows;
  /** Routes that are not procedures: public non-JSON ones, protocols of their own (see ModuleHttpRoute). */
  httpRoutes?: readonly ModuleHttpRoute[];
  /**
   * Run at every start, after the migrations: encrypts the module's secrets still stored in clear (rows written
   * before their column was encrypted; docs/security.md). Returns how many rows it encrypted; must be cheap when
   * none are left.
   */
  encryptAtRest?: (deps: AppDeps) => Promise<number>;
  /**
   * The columns holding values encrypted at rest (lib/crypto.ts `encryptSecret`): re-encrypted under the current key
   * at every start, after `encryptAtRest` (docs/security.md, "Rotating the at-rest key").
   */
  atRest?: readonly AtRestColumn[];
}

export function defineModule<const M extends ModuleManifest>(manifest: M): M {
  return manifest;
}

/** What a manifest's `create` builds (its promise resolved); never for a module without one. */
export type RuntimeOf<M> = M extends { create?: infer C }
  ? // eslint-disable-next-line @typescript-eslint/no-explicit-any
    NonNullable<C> extends (...args: any[]) => infer R
    ? Awaited<R>
    : never
  : never;

/** `deps.modules`: each module that declares `create`, by name, with what it builds. */
export type RuntimesOf<L extends readonly ModuleManifest[]> = {
  readonly [M in L[number] as [RuntimeOf<M>] extends [never] ? never : M['name']]: RuntimeOf<M>;
};
