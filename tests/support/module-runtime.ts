import type { AppDeps } from '../../server/kit/deps.js';
import type { ModuleOverrides } from '../../server/kit/runtime.js';

type ModuleName = keyof AppDeps['modules'];

/**
 * The test hook that swaps pieces of a running server's module runtime (`deps.modules.<name>`, read-only to the
 * server's code) for a while: a driver that fails in the middle of a renewal, on the shared server. Returns the
 * function that puts the pieces it replaced back; call it in a `finally`. To replace a piece from the start, pass
 * `modules` to startTestServer instead.
 */
export function overrideModule<K extends ModuleName>(
  deps: AppDeps,
  name: K,
  pieces: NonNullable<ModuleOverrides[K]>,
): () => void {
  const runtime = deps.modules[name] as object as Record<string, unknown>;
  const before: Record<string, unknown> = {};
  for (const key of Object.keys(pieces)) before[key] = runtime[key];
  Object.assign(runtime, pieces);
  return () => {
    Object.assign(runtime, before);
  };
}
