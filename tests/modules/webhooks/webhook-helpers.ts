import { expect } from 'chai';
import type { TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import type { TestServer } from '../../support/server.js';

/** Creates a webhook over HTTP as `owner` (201 expected) and returns its id and its one-time secret. */
export async function createWebhook(
  s: TestServer,
  owner: TestUser,
  url: string,
  events: string[],
): Promise<{ id: string; secret: string }> {
  const res = await http(s.baseUrl, 'POST', '/v1/webhooks', { token: owner.token, body: { url, events } });
  expect(res.status, res.text).to.equal(201);
  return res.body.webhook as { id: string; secret: string };
}
