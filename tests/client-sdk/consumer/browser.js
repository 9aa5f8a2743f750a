// Bundled for the browser by tests/client-sdk/package.test.ts: the SDK must need nothing but fetch.
import { createClient } from '@cloud-platform/client';

export const client = createClient({ baseUrl: 'https://api.example.com' });
