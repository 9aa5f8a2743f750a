// Runs on the password hasher's worker threads (server/access/passwords.ts). Loaded by Node's own type stripping,
// without tsx: plain type annotations only, and no imports but packages.
import bcrypt from 'bcryptjs';

export function hash(task: { password: string; cost: number }): Promise<string> {
  return bcrypt.hash(task.password, task.cost);
}

export function compare(task: { password: string; hash: string }): Promise<boolean> {
  return bcrypt.compare(task.password, task.hash);
}
