import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/** A card on file of an organization (card data stays at the processor; only what the API shows is kept). */
export const PaymentMethodSchema = defineEntity({
  name: 'PaymentMethod',
  tableName: 'payment_methods',
  extends: BaseSchema,
  properties: {
    organization: () => p.manyToOne(Organization).index().deleteRule('cascade'),
    type: p.enum(['card'] as const).default('card'),
    brand: p.string().length(32),
    last4: p.string().length(4),
    expMonth: p.integer(),
    expYear: p.integer(),
    processorRef: p.string().length(128).lazy(),
    isDefault: p.boolean().default(false),
  },
});
export class PaymentMethod extends PaymentMethodSchema.class {}
PaymentMethodSchema.setClass(PaymentMethod);
