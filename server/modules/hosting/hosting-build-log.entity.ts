import { defineEntity, p } from '@mikro-orm/core';
import { LOG_STREAMS } from './hosting.constants.js';
import { HostingDeployment } from './hosting-deployment.entity.js';

/**
 * One line of a build's log, numbered from 1 within its deployment. Written and read with plain SQL (build-logs.ts):
 * lines are many and only ever appended.
 */
export const HostingBuildLogSchema = defineEntity({
  name: 'HostingBuildLog',
  tableName: 'hosting_build_logs',
  properties: {
    deployment: () => p.manyToOne(HostingDeployment).primary().deleteRule('cascade'),
    seq: p.integer().primary(),
    timestamp: p.datetime(3).columnType('timestamptz(3)'),
    stream: p.enum(LOG_STREAMS),
    message: p.text(),
  },
});

export class HostingBuildLog extends HostingBuildLogSchema.class {}
HostingBuildLogSchema.setClass(HostingBuildLog);
