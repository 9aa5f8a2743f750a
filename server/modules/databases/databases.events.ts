import { defineEvent } from '../../events/define-event.js';
import { ZBackup, ZDatabaseDetail } from './databases.schema.js';

/** Payloads are the API's views; the password is never in them (`****` in `connection_string`). */
export const databaseCreated = defineEvent('database.created', ZDatabaseDetail, {
  description: 'A database was created (`POST /databases`); it is `creating`.',
});
export const databaseUpdated = defineEvent('database.updated', ZDatabaseDetail, {
  description:
    'A database was changed: `PUT /databases/{id}` (size, backups), its deletion canceled, its password reset; ' +
    'a real one turned read-only over its storage or writable again (`read_only`), or its creation `failed`.',
});
export const databaseDeleted = defineEvent('database.deleted', ZDatabaseDetail, {
  description:
    'Deletion of a database was initiated (`DELETE /databases/{id}`): it is `deleting` until `deletion_scheduled`.',
});
export const databaseBackupCompleted = defineEvent('database.backup.completed', ZBackup, {
  description:
    'A backup (automatic, manual or final) reached `completed`: for a real database, when its dump is in the store.',
});

export const DATABASE_EVENTS = [databaseCreated, databaseUpdated, databaseDeleted, databaseBackupCompleted];
