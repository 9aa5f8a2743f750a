import { defineEntity, p } from '@mikro-orm/core';
import { HostingSite } from './hosting-site.entity.js';

/**
 * What the edge served for a site, per minute (edge-traffic.ts): requests and response body bytes, summed over every
 * process. Read by the detail view's `metrics` of sites built for real; goes with its site.
 */
export const HostingEdgeTrafficSchema = defineEntity({
  name: 'HostingEdgeTraffic',
  tableName: 'hosting_edge_traffic',
  properties: {
    site: () => p.manyToOne(HostingSite).primary().deleteRule('cascade'),
    minute: p.datetime(3).primary().columnType('timestamptz(3)'),
    requests: p.bigint('number'),
    bytes: p.bigint('number'),
  },
});

export class HostingEdgeTraffic extends HostingEdgeTrafficSchema.class {}
HostingEdgeTrafficSchema.setClass(HostingEdgeTraffic);
