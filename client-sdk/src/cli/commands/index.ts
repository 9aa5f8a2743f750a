import type { CommandGroup } from '../command-group.js';
import account from './account.js';
import apiKeys from './api-keys.js';
import audit from './audit.js';
import auth from './auth.js';
import billing from './billing.js';
import databases from './databases.js';
import domains from './sso.js';
import organization from './organization.js';
import sites from './sites.js';
import users from './users.js';
import vpn from './vpn.js';
import webhooks from './webhooks.js';

/**
 * Every command group, in the order of `cloud --help`. A new group is one file in this directory, default-exporting
 * `defineCommandGroup({...})`, and its line here (client-sdk/README.md, "Adding a command group").
 */
export const commandGroups: readonly CommandGroup[] = [
  auth,
  account,
  vpn,
  sites,
  databases,
  billing,
  webhooks,
  users,
  apiKeys,
  audit,
  organization,
  domains,
];
