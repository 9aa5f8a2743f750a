import type { Em } from '../../server/db/orm.js';

/**
 * What the in-memory repositories of the unit tests share (tests/modules/<m>/in-memory-*.repository.ts): rows are
 * instances of the entity classes, built with every column given, so that a fake's rows have the entity's type
 * without a cast; each fake is held to its MikroORM repository by the module's contract suite
 * (tests/modules/<m>/<m>.repository-contract.ts).
 */

/** The unit of work of an in-memory repository: nothing (rows change in place; a transaction has no rollback). */
export const NO_EM = {} as Em;

/** The columns of an entity: its string keys that are not methods. */
export type Columns<T> = {
  [K in keyof T as K extends string ? (T[K] extends (...args: never[]) => unknown ? never : K) : never]: T[K];
};

/** A row of `entity` holding exactly `columns` (every one of them: a column added to the entity must be given here). */
export function row<T extends object>(entity: new () => T, columns: Columns<T>): T {
  return Object.assign(new entity(), columns);
}

/** A reference to the row `id` of `entity` (as the ORM's unloaded references: only the id is set). */
export function reference<T extends { id: string }>(entity: new () => T, id: string): T {
  const r = new entity();
  r.id = id;
  return r;
}

/** Newest first, then by id descending: the order of every list page (docs/api-conventions.md, "Lists"). */
export const newestFirst = <T extends { createdAt: Date; id: string }>(a: T, b: T): number =>
  b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0);

/** By id, ascending. */
export const byId = <T extends { id: string }>(a: T, b: T): number =>
  a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
