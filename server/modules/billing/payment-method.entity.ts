import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';

/** A card on file of an organization (card data stays at the processor; only what the API shows is kept). */
export const PaymentMethodSchema = defineEntity({
  name: 'PaymentMethod',
  tableName: 'payment_methods',
  extends: BaseSchema,
  // As the billing migration creates them (tests/db/schema-drift.test.ts).
  indexes: [
    {
      name: 'payment_methods_organization_id_index',
      expression:
        'create index "payment_methods_organization_id_index" on "payment_methods" ("organization_id", "created_at" desc, "id" desc)',
    },
  ],
  // One default method per organization.
  uniques: [
    {
      name: 'payment_methods_default_unique',
      expression:
        'create unique index "payment_methods_default_unique" on "payment_methods" ("organization_id") where "is_default"',
    },
  ],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
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
