/**
 * What the published declaration file puts in place of the server's own context, meta and error-data types when it
 * inlines the router's type (scripts/build.js). A client never sees a procedure's context or meta; the error data
 * is the `error.data` the API sends (README, "Errors"). Types only: nothing here exists at run time.
 */
import type { ApiErrorCode, ErrorDetail } from './errors.js';
// Type-only and checked at compile time below; not part of the emitted declarations.
import type { ErrorData as ServerErrorData } from '../../server/trpc/init.js';

/** A procedure's server-side context: opaque to clients. */
export type Context = object;

/** A procedure's metadata (OpenAPI path, permissions): opaque to clients. */
export type Meta = Record<string, unknown>;

/** The `error.data` of every error the API answers with. */
export interface ErrorData {
  code: ApiErrorCode;
  httpStatus: number;
  message: string;
  details?: ErrorDetail[];
  request_id?: string;
  retry_after?: number;
}

// The shape above must accept whatever the server sends: this fails to compile if the server's grows apart.
type Expect<T extends true> = T;
type _ServerErrorDataFits = Expect<ServerErrorData extends ErrorData ? true : false>;
