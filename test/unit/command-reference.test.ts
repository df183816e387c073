// docs/commands.md is generated from the commands (scripts/command-reference.mjs): a command whose
// help changed without the reference fails here, with the command that brings it up to date.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';

import { REPO_ROOT } from '../helpers/cli.js';

interface ReferenceModule {
  commandReference(root?: string): Promise<string>;
  REFERENCE_PATH: string;
  REGENERATE: string;
}

const load = async (): Promise<ReferenceModule> => (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'command-reference.mjs')).href)) as ReferenceModule;

/** Command ids from the compiled command files, as oclif finds them. */
function commandIds(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) commandIds(p, out);
    else if (e.name.endsWith('.js')) out.push(relative(join(REPO_ROOT, 'dist', 'src', 'commands'), p).replace(/\.js$/, '').split(sep).join(' '));
  }
  return out;
}

test('docs/commands.md is what scripts/command-reference.mjs writes', async () => {
  const { commandReference, REFERENCE_PATH, REGENERATE } = await load();
  const generated = await commandReference();
  const ids = commandIds(join(REPO_ROOT, 'dist', 'src', 'commands'));
  assert.ok(ids.length > 10, `commands found: ${ids.join(', ')}`);
  for (const id of ids) assert.match(generated, new RegExp(`^## gazctl ${id}$`, 'm'), `the reference has a section for gazctl ${id}`);
  const current = readFileSync(REFERENCE_PATH, 'utf8');
  // Compared as text; the message says what to run rather than printing two 50 kB strings.
  if (current !== generated) {
    const a = current.split('\n');
    const b = generated.split('\n');
    let i = 0;
    while (i < a.length && a[i] === b[i]) i++;
    assert.fail(`docs/commands.md is out of date (first difference at line ${i + 1}: ${JSON.stringify(a[i] ?? '')} != ${JSON.stringify(b[i] ?? '')}): run ${REGENERATE}`);
  }
  // Deterministic: a second run gives the same text.
  assert.equal(await commandReference(), generated);
});
