/**
 * A third party's program, type-checked against types that openapi-typescript generates from `/v1/openapi.json`
 * (tests/openapi/typed-client.test.ts): it reads a webhook, a user and a delivery with openapi-fetch and writes
 * back what it read (`events`, `permissions`, `event_type`) without a cast, and types a webhook receiver from the
 * document's `webhooks`. Not part of the project's own build: generated/ is written by the test.
 */
import createClient from 'openapi-fetch';
import type { components, paths, webhooks } from './generated/openapi.js';

const api = createClient<paths>({ baseUrl: 'https://api.example.com/v1' });

export async function roundTrip(webhookId: string, userId: string): Promise<void> {
  const webhook = await api.GET('/webhooks/{id}', { params: { path: { id: webhookId } } });
  if (!webhook.data) throw new Error(webhook.error.error.code);
  await api.PUT('/webhooks/{id}', {
    params: { path: { id: webhookId } },
    body: { events: webhook.data.webhook.events, url: webhook.data.webhook.url },
  });

  const user = await api.GET('/users/{id}', { params: { path: { id: userId } } });
  if (!user.data) throw new Error(user.error.error.code);
  await api.PUT('/users/{id}', {
    params: { path: { id: userId } },
    body: { permissions: user.data.user.permissions },
  });

  const deliveries = await api.GET('/webhooks/{id}/deliveries', { params: { path: { id: webhookId } } });
  const delivery = deliveries.data?.deliveries[0];
  if (delivery) {
    await api.POST('/webhooks/{id}/test', {
      params: { path: { id: webhookId } },
      body: { event_type: delivery.event_type },
    });
    // A delivery's `event_type` is one of the event names: filtering the list by it needs no cast either.
    await api.GET('/webhooks/{id}/deliveries', {
      params: { path: { id: webhookId }, query: { event_type: delivery.event_type } },
    });
  }

  // The enums are real: a name outside the catalogue does not type-check.
  await api.PUT('/webhooks/{id}', {
    params: { path: { id: webhookId } },
    // @ts-expect-error not an event name
    body: { events: ['user.renamed'] },
  });
  // `owner` is not a role these operations give.
  // @ts-expect-error not an assignable role
  await api.POST('/users', { body: { email: 'a@example.com', role: 'owner' } });
}

/** A receiver: the body of each event type is typed, `data.object` included. */
type UserCreated = NonNullable<
  webhooks['user.created']['post']['requestBody']
>['content']['application/json'];
type Delivered = components['schemas']['WebhookDelivery'];

export function onUserCreated(body: UserCreated): string {
  const type: 'user.created' = body.type;
  const permissions: Delivered['event_type'] | string = body.data.object.permissions[0] ?? type;
  return `${body.data.object.email} ${permissions}`;
}
