// The part of oidc-provider (a JavaScript package without types) that tests/support/oidc-provider.ts uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  /** The Koa context of a request, as far as a test's middleware reads and changes it. */
  export interface ProviderContext {
    path: string;
    method: string;
    status: number;
    body: unknown;
  }

  export class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(fn: (ctx: ProviderContext, next: () => Promise<void>) => Promise<void>): this;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export default Provider;
}
