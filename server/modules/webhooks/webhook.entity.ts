import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { WEBHOOK_STATUSES } from './webhooks.constants.js';

/**
 * `active`: receives events; `inactive`: paused by the customer (`active: false`); `disabled`: the receiver answered
 * 410, or every attempt failed for `WEBHOOK_DISABLE_AFTER`.
 */

export const WebhookSchema = defineEntity({
  name: 'Webhook',
  tableName: 'webhooks',
  extends: BaseSchema,
  indexes: [{ name: 'webhooks_organization_id_index', properties: ['organization', 'createdAt'] }],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    url: p.string().length(2048),
    /** Subscribed event names (docs/webhooks.md, "Webhooks"). */
    events: p.array(),
    description: p.string().length(500).nullable(),
    /** `whsec_` + base64 of 32 random bytes. Needed in clear to sign deliveries; never serialised. */
    secret: p.string().length(128).hidden(),
    status: p.enum(WEBHOOK_STATUSES).default('active'),
    /** The secret before the latest rotation: deliveries are signed with it too until it expires. Never serialised. */
    previousSecret: p.string().length(128).nullable().hidden(),
    previousSecretExpiresAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Start of the current run of failed attempts; null after a success (auto-disable, docs/webhooks.md "Webhooks"). */
    failingSince: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});
export class Webhook extends WebhookSchema.class {}
WebhookSchema.setClass(Webhook);
