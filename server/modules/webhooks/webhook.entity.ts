import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { WEBHOOK_STATUSES } from './webhooks.constants.js';

/** `active`: receives events; `inactive`: paused by the customer (`active: false`); `disabled`: the receiver answered 410. */

export const WebhookSchema = defineEntity({
  name: 'Webhook',
  tableName: 'webhooks',
  extends: BaseSchema,
  indexes: [{ name: 'webhooks_organization_id_index', properties: ['organization', 'createdAt'] }],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    url: p.string().length(2048),
    /** Subscribed event names (README, "Webhooks"). */
    events: p.array(),
    description: p.string().length(500).nullable(),
    /** `whsec_` + base64 of 32 random bytes. Needed in clear to sign deliveries; never serialised. */
    secret: p.string().length(128).hidden(),
    status: p.enum(WEBHOOK_STATUSES).default('active'),
  },
});
export class Webhook extends WebhookSchema.class {}
WebhookSchema.setClass(Webhook);
