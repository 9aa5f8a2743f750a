// Test tier: server
import { defineSecurityTable } from './support/security-table.js';

// One test per procedure of the router: see tests/support/security-table.ts and security-fixtures.ts.
defineSecurityTable();
