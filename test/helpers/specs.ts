// Shared helpers for the spec tests: fixture access.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Compiled helpers live in dist/test/helpers; fixtures stay in test/fixtures/spec.
const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/spec/', import.meta.url));

export function fixture(name: string): string {
  return readFileSync(FIXTURES + name, 'utf8');
}
