import { TRPCError, type AnyTRPCProcedure, type AnyTRPCRouter } from '@trpc/server';
import { fastifyRequestHandler } from '@trpc/server/adapters/fastify';
import { getHTTPStatusCode } from '@trpc/server/http';
import {
  getErrorShape,
  getProcedureAtPath,
  getTRPCErrorFromUnknown,
  isAsyncIterable,
  isObject,
  isPromise,
  transformTRPCResponse,
} from '@trpc/server/unstable-core-do-not-import';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Context } from './context.js';

/**
 * `/trpc`: the tRPC HTTP protocol (the typed client SDK's transport) answered without building a Fetch `Request`
 * per call.
 *
 * tRPC's own Fastify adapter turns every request into a Fetch `Request` carrying an `AbortSignal`, and combines
 * signals again per call. The Fetch implementation registers each such request with a finalizer that holds the
 * signal it was given until the request is collected and the finalizer has run; under sustained load those records
 * pile up faster than they are finalized, so the live heap grew by about 0.6 KB per call (docs/benchmarks.md, "Benchmarks").
 *
 * This transport answers the requests the SDK sends (`GET` queries with `?input=`, `POST` mutations with a JSON
 * body, batches as `/trpc/a,b?batch=1` with `input` keyed by index) the way tRPC 11's `resolveResponse` does: the
 * same envelope (`{result: {data}}` / `{error}` shaped by the router's error formatter), the same HTTP status
 * (`getHTTPStatusCode`: one call's status, or 207 when a batch's calls differ), the same headers (`vary`, `allow` on
 * a wrong method, those the procedures set through the context), errors isolated per call, and input read lazily so
 * that a malformed `input` fails each call, not the request. Requests of any other kind (`HEAD`, other methods,
 * other media types, streaming with `trpc-accept` / `Accept: application/jsonl`, `connectionParams`, subscriptions)
 * are handed to tRPC's own adapter unchanged: they are rare, and so behave exactly as before.
 */

/** What `createContext`, `onError` and `responseMeta` receive: the subset of tRPC's options the server uses. */
export interface TrpcHttpOptions {
  router: AnyTRPCRouter;
  createContext: (opts: { req: FastifyRequest; res: FastifyReply; info: unknown }) => Context;
  onError?: (opts: {
    error: TRPCError;
    path: string | undefined;
    input: unknown;
    ctx: Context | undefined;
    type: string;
    req: FastifyRequest;
  }) => void;
  responseMeta?: (opts: { ctx?: Context }) => { headers?: Record<string, string>; status?: number };
}

const ACCEPTED_METHODS: Record<string, readonly string[]> = {
  mutation: ['POST'],
  query: ['GET'],
  subscription: ['GET'],
};

type CallOutcome = [error: TRPCError, data: undefined] | [error: undefined, data: unknown];

/** Output that only a streaming link can carry (tRPC refuses it on the JSON answer). */
function isDataStream(v: unknown): boolean {
  if (!isObject(v)) return false;
  if (isAsyncIterable(v)) return true;
  const values = Object.values(v);
  return values.some(isPromise) || values.some(isAsyncIterable);
}

/** The media type of a (lowercased) Content-Type header, without its parameters. */
function mediaTypeOf(contentType: string | undefined): string | undefined {
  return contentType?.split(';', 1)[0]!.trim();
}

/** Whether tRPC's own adapter must answer: anything but a plain JSON query or mutation call. */
function needsTrpcAdapter(req: FastifyRequest, search: URLSearchParams): boolean {
  const { method, headers } = req;
  if (method !== 'GET' && method !== 'POST') return true;
  const type = mediaTypeOf(headers['content-type']);
  if (
    method === 'POST'
      ? type !== 'application/json'
      : type === 'multipart/form-data' || type === 'application/octet-stream'
  )
    return true;
  if (headers['trpc-accept'] !== undefined) return true;
  const accept = headers.accept;
  if (
    accept?.includes('application/jsonl') &&
    accept.split(',').some((t) => t.trim() === 'application/jsonl')
  )
    return true;
  return search.has('connectionParams');
}

/** Body text as tRPC reads it from the request: the raw JSON text, or a value a hook set, serialized. */
function bodyText(req: FastifyRequest): string {
  const body = req.body;
  // Read as the Fetch API reads a body as text: a leading byte order mark is not part of it.
  if (typeof body === 'string') return body.charCodeAt(0) === 0xfeff ? body.slice(1) : body;
  return body === undefined ? '' : JSON.stringify(body);
}

/**
 * The calls' inputs, parsed once on first use (as tRPC's lazy reader): a parse failure becomes every call's
 * `BAD_REQUEST`, with the parser's error as its cause.
 */
function inputReader(
  raw: () => string,
  isBatch: boolean,
  count: number,
  transformer: { deserialize: (value: unknown) => unknown },
) {
  let parsed: Record<number, unknown> | undefined;
  let failure: TRPCError | undefined;
  const parse = (): Record<number, unknown> => {
    const text = raw();
    const inputs: unknown = text ? JSON.parse(text) : undefined;
    const out = Object.create(null) as Record<number, unknown>;
    if (inputs === undefined) return out;
    if (!isBatch) {
      out[0] = transformer.deserialize(inputs);
      return out;
    }
    if (!isObject(inputs)) {
      throw new TRPCError({
        code: 'BAD_REQUEST',
        message: '"input" needs to be an object when doing a batch call',
      });
    }
    for (let i = 0; i < count; i++) {
      const input = (inputs as Record<number, unknown>)[i];
      if (input !== undefined) out[i] = transformer.deserialize(input);
    }
    return out;
  };
  return {
    read(): Record<number, unknown> {
      if (parsed) return parsed;
      if (failure) throw failure;
      try {
        return (parsed = parse());
      } catch (cause) {
        failure =
          cause instanceof TRPCError
            ? cause
            : new TRPCError({
                code: 'BAD_REQUEST',
                message: cause instanceof Error ? cause.message : 'Invalid input',
                cause,
              });
        throw failure;
      }
    },
    /** The input if it was read already (what errors report), else undefined. */
    result(index: number): unknown {
      return parsed?.[index];
    },
  };
}

async function procedureAt(router: AnyTRPCRouter, path: string): Promise<AnyTRPCProcedure | null> {
  const procedures = router._def.procedures as Record<string, AnyTRPCProcedure | undefined>;
  return procedures[path] ?? (await getProcedureAtPath(router, path));
}

/** Registers `/trpc/:path` (all methods) in its own scope, with the content-type parsers tRPC's adapter uses. */
export async function registerTrpcRoutes(
  app: FastifyInstance,
  opts: TrpcHttpOptions & { prefix: string },
): Promise<void> {
  const { router, prefix } = opts;
  const config = router._def._config as Parameters<typeof getErrorShape>[0]['config'];
  const separator = (config as { pathSeparator?: string }).pathSeparator ?? '.';

  await app.register(async (scope) => {
    // As tRPC's plugin: JSON bodies reach the handler as text (tRPC parses them itself), multipart as the stream.
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) =>
      done(null, body),
    );
    scope.removeContentTypeParser('multipart/form-data');
    scope.addContentTypeParser('multipart/form-data', {}, (_req, body, done) => done(null, body));

    scope.all(`${prefix}/:path`, async (req, reply) => {
      const path = (req.params as { path: string }).path;
      const q = req.url.indexOf('?');
      const search = new URLSearchParams(q === -1 ? '' : req.url.slice(q + 1));
      if (req.url.includes('#') || needsTrpcAdapter(req, search)) await delegate(req, reply, path);
      else await answer(req, reply, path, search);
      return reply;
    });
  });

  /** tRPC's own adapter answers the request (it sends the reply). */
  async function delegate(req: FastifyRequest, reply: FastifyReply, path: string): Promise<void> {
    const { createContext, onError, responseMeta } = opts;
    await fastifyRequestHandler({
      router,
      createContext,
      onError,
      responseMeta,
      req,
      res: reply,
      path,
    });
    return reply;
  }

  const report = (
    req: FastifyRequest,
    error: TRPCError,
    path: string | undefined,
    input: unknown,
    ctx: Context | undefined,
    type: string,
  ) => opts.onError?.({ error, path, input, ctx, type, req });

  async function answer(
    req: FastifyRequest,
    reply: FastifyReply,
    rawPath: string,
    search: URLSearchParams,
  ): Promise<void> {
    const method = req.method;
    const isBatch = search.get('batch') === '1';
    let ctx: Context | undefined;
    let info: { isBatchCall: boolean; type: string; calls: { path: string }[]; ran?: true } | undefined;
    let allow: string | undefined;
    try {
      // What tRPC reads before any call (its request info): the paths, their procedures and their common type.
      let decoded: string;
      try {
        decoded = decodeURIComponent(rawPath);
      } catch (cause) {
        throw new TRPCError({
          code: 'BAD_REQUEST',
          message: `Invalid URL-encoding in path "${rawPath}"`,
          cause,
        });
      }
      const procedurePath = separator === '.' ? decoded : decoded.split(separator).join('.');
      const paths = isBatch ? procedurePath.split(',') : [procedurePath];
      const procs = await Promise.all(paths.map((p) => procedureAt(router, p)));
      const types = new Set<string>();
      for (const proc of procs) if (proc) types.add(proc._def.type);
      if (types.size > 1) {
        throw new TRPCError({
          code: 'BAD_REQUEST',
          message: `Cannot mix procedure types in call: ${[...types].join(', ')}`,
        });
      }
      const type = types.values().next().value ?? 'unknown';
      info = { isBatchCall: isBatch, type, calls: paths.map((p) => ({ path: p })) };
      if (type === 'subscription') {
        await delegate(req, reply, rawPath);
        return;
      }

      const inputs = inputReader(
        () => (method === 'GET' ? (search.get('input') ?? '') : bodyText(req)),
        isBatch,
        paths.length,
        config.transformer.input,
      );
      let ctxError: TRPCError | undefined;
      try {
        ctx = opts.createContext({ req, res: reply, info });
      } catch (cause) {
        ctxError = getTRPCErrorFromUnknown(cause);
      }

      const run = async (index: number): Promise<CallOutcome> => {
        const proc = procs[index];
        const callPath = paths[index]!;
        try {
          if (!proc)
            throw new TRPCError({ code: 'NOT_FOUND', message: `No procedure found on path "${callPath}"` });
          const procType = proc._def.type;
          if (!ACCEPTED_METHODS[procType]!.includes(method)) {
            allow = ACCEPTED_METHODS[procType]!.join(', ');
            throw new TRPCError({
              code: 'METHOD_NOT_SUPPORTED',
              message: `Unsupported ${method}-request to ${procType} procedure at path "${callPath}"`,
            });
          }
          if (ctxError) throw ctxError;
          const data: unknown = await proc({
            path: callPath,
            getRawInput: async () => inputs.read()[index],
            ctx,
            type: procType,
            signal: undefined,
            batchIndex: index,
          });
          return [undefined, data];
        } catch (cause) {
          const error = getTRPCErrorFromUnknown(cause);
          report(req, error, callPath, inputs.result(index), ctx, proc?._def.type ?? 'unknown');
          return [error, undefined];
        }
      };

      if (!isBatch) {
        const [error, data] = await run(0);
        info.ran = true;
        if (!error && isDataStream(data)) {
          throw new TRPCError({
            code: 'UNSUPPORTED_MEDIA_TYPE',
            message: 'Cannot use stream-like response in non-streaming request - use httpBatchStreamLink',
          });
        }
        const res = error
          ? {
              error: getErrorShape({
                config,
                ctx,
                error,
                input: inputs.result(0),
                path: paths[0],
                type: type as 'query',
              }),
            }
          : { result: { data } };
        send(reply, res, error ? [error] : [], ctx, allow);
        return;
      }

      info.ran = true;
      const outcomes = await Promise.all(paths.map((_, i) => run(i)));
      const errors: (TRPCError | undefined)[] = [];
      const items = outcomes.map(([callError, data], i) => {
        let error = callError;
        if (!error && isDataStream(data)) {
          error = new TRPCError({
            code: 'UNSUPPORTED_MEDIA_TYPE',
            message: 'Cannot use stream-like response in non-streaming request - use httpBatchStreamLink',
          });
        }
        errors.push(error);
        if (!error) return { result: { data } };
        return {
          error: getErrorShape({
            config,
            ctx,
            error,
            input: inputs.result(i),
            path: paths[i],
            type: procs[i]?._def.type ?? 'unknown',
          }),
        };
      });
      send(reply, items, errors, ctx, allow);
      return;
    } catch (cause) {
      // An error of the request as a whole (its path, mixed types), answered as one error.
      const error = getTRPCErrorFromUnknown(cause);
      const type = info?.type ?? 'unknown';
      report(req, error, undefined, undefined, ctx, type);
      const res = {
        error: getErrorShape({
          config,
          ctx,
          error,
          input: undefined,
          path: undefined,
          type: type as 'query',
        }),
      };
      // tRPC names the JSON media type once its calls have run; an error of the request before that goes out
      // with the Fetch API's default for a text body.
      send(reply, res, [error], ctx, allow, info?.ran ? 'application/json' : 'text/plain;charset=UTF-8');
    }
  }

  function send(
    reply: FastifyReply,
    untransformed: Parameters<typeof getHTTPStatusCode>[0],
    errors: (TRPCError | undefined)[],
    ctx: Context | undefined,
    allow: string | undefined,
    contentType = 'application/json',
  ): void {
    let status = getHTTPStatusCode(untransformed, errors);
    // Added to what an earlier step set (`Origin`, by CORS), not in its place.
    const vary = reply.getHeader('vary');
    void reply.header('vary', vary ? `${String(vary)}, trpc-accept, accept` : 'trpc-accept, accept');
    if (allow) void reply.header('allow', allow);
    void reply.header('content-type', contentType);
    const meta = opts.responseMeta?.({ ctx });
    if (meta?.headers) {
      for (const [name, value] of Object.entries(meta.headers)) {
        if (typeof value === 'string') void reply.header(name.toLowerCase(), value);
      }
    }
    if (meta?.status) status = meta.status;
    const body = JSON.stringify(transformTRPCResponse(config, untransformed as never));
    // Bytes, so that Fastify sends the media type as set (it would add a charset to a string's).
    void reply.status(status).send(Buffer.from(body));
  }
}
