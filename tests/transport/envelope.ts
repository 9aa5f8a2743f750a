import { expect } from 'chai';
import { ERROR_STATUS, type ErrorCode } from '../../server/lib/errors.js';

/** Words that only a leaked stack trace, SQL statement or driver message would contain. */
/** What must never reach a client: stack frames, SQL, driver messages, a connection string (not the engine name `postgresql`). */
export const LEAK_PATTERN =
  /\bat .+\(.*:\d+:\d+\)|node_modules|\.ts:\d+|\bselect\b|\binsert into\b|\bfrom "|relation "|syntax error|violates|ECONNREFUSED|Mikro|PGlite|postgres(ql)?:\/\//i;

/**
 * Asserts the error envelope (docs/api-conventions.md "Errors"), exactly: `{success:false, error:{code, message, details?, request_id}}`,
 * the status of the code (or `status`, for the transport statuses 408, 414 and 431 that have no code of their own),
 * `request_id` equal to the `X-Request-Id` header, and nothing that leaks internals.
 */
export function expectError(
  res: { status: number; text: string; body: any; headers: Headers | Record<string, unknown> },
  code: ErrorCode,
  status: number = ERROR_STATUS[code],
): { code: string; message: string; details?: any[]; request_id: string } {
  const header = (name: string) =>
    res.headers instanceof Headers ? res.headers.get(name) : (res.headers[name] as string | undefined);
  expect(res.status, res.text).to.equal(status);
  expect(header('content-type')).to.match(/^application\/json/);
  expect(Object.keys(res.body)).to.have.members(['success', 'error']);
  expect(res.body.success).to.equal(false);
  const err = res.body.error;
  const keys = Object.keys(err);
  expect(keys).to.include.members(['code', 'message', 'request_id']);
  expect(keys.filter((k) => !['code', 'message', 'details', 'request_id'].includes(k))).to.deep.equal([]);
  expect(err.code).to.equal(code);
  expect(err.message).to.be.a('string').and.not.equal('');
  if ('details' in err) expect(err.details).to.be.an('array');
  expect(err.request_id).to.be.a('string').and.equal(header('x-request-id'));
  expect(res.text).not.to.match(LEAK_PATTERN);
  return err;
}
