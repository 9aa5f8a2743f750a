import { readdirSync, readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

/**
 * The one way a module fails (docs/adding-a-module.md, "Checklist", steps 3 and 7): it throws the shared constructors
 * of server/lib/errors.ts (`notFound('Site')`, `conflict(...)`, `validation(path, message)`...), never
 * `new AppError(...)` nor an error helper of its own, and a router declares its errors by code in `meta.errors`,
 * never by status in `meta.openapi.errorResponses`.
 */
export interface ErrorFormViolation {
  file: string;
  line: number;
  rule: string;
}

const RULES: { pattern: RegExp; rule: string }[] = [
  {
    pattern: /\bnew AppError\(/,
    rule: 'throws `new AppError(...)`: use a constructor of server/lib/errors.ts',
  },
  {
    pattern: /\berrorResponses\s*:/,
    rule: 'declares errors by status (`errorResponses`): declare them by code in `meta.errors`',
  },
];

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = resolve(dir, e.name);
    if (e.isDirectory()) return tsFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** Every place under `dir` that fails another way than the shared constructors; paths relative to `root`. */
export function errorFormViolations(dir: string, root: string): ErrorFormViolation[] {
  const out: ErrorFormViolation[] = [];
  for (const file of tsFiles(dir)) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((text, i) => {
      for (const { pattern, rule } of RULES) {
        if (pattern.test(text))
          out.push({ file: relative(root, file).replaceAll('\\', '/'), line: i + 1, rule });
      }
    });
  }
  return out;
}
