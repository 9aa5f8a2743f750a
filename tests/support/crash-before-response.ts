/**
 * Loaded into a server process by restart tests (`node --import tsx --import ./tests/support/crash-before-response.ts
 * server/main.ts`): a request carrying `X-Test-Crash-Before-Response: 1` kills the process (SIGKILL) at the moment
 * its response would start, i.e. after the procedure finished and committed, before the client hears anything.
 */
import { ServerResponse } from 'node:http';

const proto = ServerResponse.prototype as unknown as {
  writeHead: (this: ServerResponse, ...args: unknown[]) => ServerResponse;
};
const writeHead = proto.writeHead;
proto.writeHead = function (this: ServerResponse, ...args: unknown[]) {
  if (this.req?.headers['x-test-crash-before-response'] === '1') process.kill(process.pid, 'SIGKILL');
  return writeHead.apply(this, args);
};
