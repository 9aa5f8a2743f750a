import type { AnyTRPCProcedure } from '@trpc/server';
import type { FastifyRequest } from 'fastify';
import { AppError } from './lib/errors.js';
import type { Meta } from './trpc/init.js';

/**
 * The REST adapter merges path parameters into the body (`PUT /users/{id}` with `{"id": ...}` in the body), and
 * the path wins silently. A body that names a path parameter is refused instead (400, as for any unknown field),
 * so that sending `id` in a body can never look like it was accepted.
 *
 * Returns a Fastify `preHandler` hook for the `/v1` scope.
 */
export function rejectPathParamsInBody(procedures: Record<string, AnyTRPCProcedure>, basePath = '/v1') {
  const routes: { method: string; pattern: RegExp; params: string[] }[] = [];
  for (const proc of Object.values(procedures)) {
    const openapi = (proc._def.meta as Meta | undefined)?.openapi;
    if (!openapi || !openapi.path.includes('{')) continue;
    const params = [...openapi.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
    const source = openapi.path
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+');
    routes.push({ method: openapi.method, pattern: new RegExp(`^${basePath}${source}/?$`), params });
  }

  return async (req: FastifyRequest): Promise<void> => {
    const body = req.body;
    if (!body || typeof body !== 'object' || Array.isArray(body)) return;
    const path = req.url.split('?')[0]!;
    for (const route of routes) {
      if (route.method !== req.method || !route.pattern.test(path)) continue;
      const clash = route.params.filter((p) => Object.hasOwn(body, p));
      if (clash.length === 0) return;
      throw new AppError(
        'VALIDATION_ERROR',
        `Invalid request: ${clash[0]}: Unknown field (it is part of the path)`,
        {
          details: clash.map((p) => ({ path: p, message: 'Unknown field (it is part of the path)' })),
        },
      );
    }
  };
}
