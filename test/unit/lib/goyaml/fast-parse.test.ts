import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { isMap, isScalar, isSeq, parseDocument, type Node as YNode, type Pair } from 'yaml';

import { fastParse } from '../../../../src/lib/goyaml/fast-parse.js';
import { StrictDoc } from '../../../../src/lib/goyaml/goyaml.js';
import { decodeJournalTree, encodeJournalTree, journalTreeFromListing, journalsFromListJson } from '../../../../src/lib/index.js';
import { decodeShardSet } from '../../../../src/lib/shardspace/shardspace.js';
import { fixture } from '../../../helpers/specs.js';
import { rng } from '../../../helpers/random.js';

/** What the spec decoders read of a node: structure, scalar text and style, and positions. */
type Shape = null | { scalar: string; type: string | undefined; at: number } | { seq: Shape[]; at: number } | { map: [Shape, Shape][]; at: number };

function shape(n: YNode | null | undefined): Shape {
  if (n === null || n === undefined) return null;
  if (isScalar(n)) return { scalar: String(n.value), type: n.type, at: n.range![0] };
  if (isSeq(n)) return { seq: (n.items as YNode[]).map(shape), at: n.range![0] };
  if (isMap(n)) return { map: (n.items as Pair<YNode, YNode>[]).map((p) => [shape(p.key), shape(p.value)]), at: n.range![0] };
  throw new Error('unexpected node kind');
}

/** The full parser's reading, as StrictDoc.parse configures it; undefined when it has errors. */
function slowShape(text: string): Shape | undefined {
  const doc = parseDocument(text, { schema: 'failsafe', uniqueKeys: false, prettyErrors: false, strict: true });
  if (doc.errors.length > 0) return undefined;
  return shape(doc.contents as YNode | null);
}

/** Either the quick reader gives up, or it reads exactly what the full parser reads. */
function agrees(text: string, what: string): boolean {
  const fast = fastParse(text);
  if (fast === undefined) return false;
  const slow = slowShape(text);
  assert.notEqual(slow, undefined, `${what}: the quick reader took text the full parser rejects:\n${text}`);
  assert.deepStrictEqual(shape(fast.root), slow, `${what}:\n${text}`);
  return true;
}

const FIXTURE_DIR = fileURLToPath(new URL('../../../../../test/fixtures/spec/', import.meta.url));
const YAML_FIXTURES = readdirSync(FIXTURE_DIR).filter((f) => f.endsWith('.yaml')).map((f) => [f, fixture(f)] as const);

/** Re-indents block sequences under keys by two more columns (another common layout). */
function indentSequences(text: string): string {
  const lines = text.split('\n');
  const out: string[] = [];
  const stack: number[] = []; // extra indentation in force, by the indentation it started at
  for (const line of lines) {
    const ind = line.length - line.trimStart().length;
    while (stack.length && ind < stack[stack.length - 1]!) stack.pop();
    const extra = stack.length * 2;
    out.push(line === '' ? '' : ' '.repeat(extra) + line);
    if (/:$/.test(line) && lines[out.length]?.trimStart().startsWith('- ') && lines[out.length]!.length - lines[out.length]!.trimStart().length === ind) {
      stack.push(ind);
    }
  }
  return out.join('\n');
}

const SNIPPETS = [
  ' ', '  ', ':', ': ', '-', '- ', '#', ' #', "'", '"', '\\', '\t', '\r', '[', ']', '{', '}', '[]', '{}', '&a', '*a', '!', '|', '>',
  '?', ',', '%', '@', '`', '---', '...', 'x', '\n', '\n  ', '\n- ', 'é', '~', 'null', 'yes', '0x1F', '-1', "''", '""',
];

describe('fastParse', () => {
  it('reads the spec fixtures (and re-indented variants) exactly as the full parser does', () => {
    let taken = 0;
    for (const [name, text] of YAML_FIXTURES) {
      if (agrees(text, name)) taken++;
      agrees(indentSequences(text), `${name} with indented sequences`);
      agrees(`# a comment\n\n${text.replace(/\n/g, '\n\n')}`, `${name} with blank and comment lines`);
    }
    assert.ok(taken >= YAML_FIXTURES.length - 2, `only ${taken} of ${YAML_FIXTURES.length} fixtures were in the subset`);
  });

  it('never reads mutated documents differently from the full parser', () => {
    let taken = 0;
    let total = 0;
    for (let seed = 1; seed <= 4000; seed++) {
      const r = rng(seed);
      const [, base] = YAML_FIXTURES[Math.floor(r() * YAML_FIXTURES.length)]!;
      let text = base;
      for (let k = 0, n = 1 + Math.floor(r() * 3); k < n; k++) {
        const at = Math.floor(r() * (text.length + 1));
        const op = Math.floor(r() * 3);
        const snip = SNIPPETS[Math.floor(r() * SNIPPETS.length)]!;
        if (op === 0) text = text.slice(0, at) + snip + text.slice(at);
        else if (op === 1) text = text.slice(0, at) + text.slice(at + 1 + Math.floor(r() * 4));
        else text = text.slice(0, at) + snip + text.slice(at + snip.length);
      }
      total++;
      if (agrees(text, `seed ${seed}`)) taken++;
    }
    // Most mutations keep the text in the subset, so the comparison above is not vacuous.
    assert.ok(taken > total / 8, `only ${taken} of ${total} mutated documents were read`);
  });

  it('gives up on what is outside its subset', () => {
    for (const text of [
      'a: &x 1\nb: *x\n',
      'a: !!str 1\n',
      'a: |\n  text\n',
      'a: b # trailing comment\n',
      'a:\tb\n',
      'a: b\r\n',
      'a: [1, 2]\n',
      '---\na: b\n',
      'a: "esc\\n"\n',
      "a: 'multi\n\n  line'\n",
      'a: multi\n  line: x\n',
      'a:\n',
      'Name: x\n',
      'a: é\n',
      '- - x\n',
      'a: b: c\n',
    ]) {
      assert.equal(fastParse(text), undefined, JSON.stringify(text));
    }
  });

  it('reads empty and comment-only documents as no root, like the full parser', () => {
    assert.equal(fastParse('')!.root, null);
    assert.equal(fastParse('  \n# only a comment\n')!.root, null);
    assert.equal(StrictDoc.parseFast('')!.root, null);
  });

  it('a listing of 2,000 journals is read without the full parser and decodes like it', () => {
    const journals = journalsFromListJson(fixture('list-acme.json'));
    const many = [];
    for (let i = 0; i < 2000; i++) {
      const j = journals[i % journals.length]!;
      many.push({ ...j, spec: { ...j.spec!, name: `bulk/part-${String(i % 7)}/${String(i).padStart(5, '0')}/${j.spec!.name}` } });
    }
    many.sort((a, b) => (a.spec.name < b.spec.name ? -1 : 1));
    const text = encodeJournalTree(journalTreeFromListing(many));
    assert.ok(agrees(text, 'bulk listing'));
  });

  it('decoders report errors from the full parser, with its line numbers', () => {
    // Both readers take this text; the unknown key is reported once, from the full parser's tree.
    const text = 'name: a/\nchildren:\n- name: a/b\n  replicas: 2\n';
    assert.ok(fastParse(text));
    assert.throws(() => decodeJournalTree(text), { message: 'line 4: unknown field "replicas" in journal node' });
    assert.throws(() => decodeShardSet('shards:\n- id: x\n  bogus: 1\n'), { message: /^line 3: unknown field "bogus"/ });
  });
});
