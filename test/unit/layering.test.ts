// The import rules of docs/architecture.md hold for src/ (dependency-cruiser with
// .dependency-cruiser.cjs), and the rule set does catch a breach: a small tree with a library
// module importing the CLI, one importing another library folder it may not, and a run-time
// cycle, each reported under its rule (a cycle of type-only imports is not one).
import { strict as assert } from 'node:assert';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { cruise, type ICruiseResult } from 'dependency-cruiser';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const config = createRequire(import.meta.url)(join(root, '.dependency-cruiser.cjs')) as {
  forbidden: unknown[];
  options: Record<string, unknown>;
};

function violations(r: ICruiseResult): string[] {
  return r.summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
}

test('src/ keeps the layering rules and has no run-time import cycles', async () => {
  const cwd = process.cwd();
  process.chdir(root);
  try {
    const out = await cruise(['src'], { ...config.options, validate: true, ruleSet: { forbidden: config.forbidden } } as never);
    const r = out.output as ICruiseResult;
    assert.ok(r.summary.totalCruised > 150, `cruised only ${r.summary.totalCruised} modules`);
    assert.deepEqual(violations(r), []);
  } finally {
    process.chdir(cwd);
  }
});

test('the rules catch an upward import, a forbidden library folder and a run-time cycle', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'layering-'));
  const file = (p: string, text: string) => {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), text);
  };
  file('src/cli/log.ts', 'export const log = 1;\n');
  file('src/lib/codecs/up.ts', "import { log } from '../../cli/log.js';\nexport const up = log;\n");
  file('src/lib/stores/s.ts', 'export const s = 1;\n');
  file('src/lib/message/m.ts', "import { s } from '../stores/s.js';\nexport const m = s;\n");
  file('src/lib/protocol/a.ts', "import { b } from './b.js';\nexport const a = () => b;\n");
  file('src/lib/protocol/b.ts', "import { a } from './a.js';\nexport const b = () => a;\n");
  // A cycle of type-only imports is no cycle at run time: not reported.
  file('src/lib/protocol/c.ts', "import type { D } from './d.js';\nexport interface C { d?: D }\nexport const c = 1;\n");
  file('src/lib/protocol/d.ts', "import type { C } from './c.js';\nexport interface D { c?: C }\nexport const d = 1;\n");
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    const { tsConfig: _ignored, ...options } = config.options;
    const out = await cruise(['src'], { ...options, validate: true, ruleSet: { forbidden: config.forbidden } } as never);
    const got = violations(out.output as ICruiseResult).sort();
    assert.deepEqual(got, [
      'lib-imports-down-only: src/lib/codecs/up.ts -> src/cli/log.ts',
      'lib-message-imports: src/lib/message/m.ts -> src/lib/stores/s.ts',
      'no-runtime-cycles: src/lib/protocol/a.ts -> src/lib/protocol/b.ts',
    ]);
  } finally {
    process.chdir(cwd);
    rmSync(dir, { recursive: true, force: true });
  }
});
