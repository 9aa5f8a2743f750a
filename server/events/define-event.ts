import type { z } from 'zod';
import type { EventType } from './event-types.js';

/**
 * An event type with the schema of its `data.object` (the resource as the API shows it): declared once by the
 * module that emits it and listed in its manifest. `recordEvent` takes the definition, so the payload is checked by
 * the compiler and, when recorded, against the schema.
 */
export interface EventDefinition<T = unknown> {
  readonly type: EventType;
  readonly schema: z.ZodType<T>;
  /**
   * `organization`: the event belongs to one organization (the usual case). `platform`: it concerns every
   * organization (a VPN server added to the shared catalogue) and is fanned out to all of them.
   */
  readonly scope: 'organization' | 'platform';
  readonly description: string;
}

// The manifests' lists hold events of every payload type.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyEventDefinition = EventDefinition<any>;

export function defineEvent<S extends z.ZodType>(
  type: EventType,
  schema: S,
  opts: { description: string; scope?: 'organization' | 'platform' },
): EventDefinition<z.output<S>> {
  return {
    type,
    schema: schema as z.ZodType<z.output<S>>,
    scope: opts.scope ?? 'organization',
    description: opts.description,
  };
}
