import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { emitGoYaml, goStringStyle, resolvePlain, StrictDoc, YamlDecodeError } from '../../../../src/lib/goyaml/goyaml.js';
import { fixture } from '../../../helpers/specs.js';

describe('goyaml emitter', () => {
  it('reproduces yaml.v2 output for every recorded string case', () => {
    const { cases } = JSON.parse(fixture('goyaml-strings.json')) as { cases: { input: string; output: string }[] };
    assert.ok(cases.length > 100);
    for (const c of cases) {
      assert.equal(emitGoYaml({ k: c.input, l: [c.input], m: { n: c.input } }), c.output, JSON.stringify(c.input));
    }
  });

  it('quotes strings that would read back as another type', () => {
    for (const s of ['', 'true', 'yes', 'Off', '1', '-7', '0x1F', '1.5', '.5', '1e3', 'null', '~', '2020-01-02', '1:20']) {
      assert.equal(goStringStyle(s), 'double', s);
    }
    for (const s of ['-', '%20', '@x', 'a: b', 'a #b', ' lead', 'trail ']) assert.equal(goStringStyle(s), 'single', s);
    for (const s of ['abc', '=x', 'a:b', 'a#b', '1.2.3', 'file:///x/', '1m0s', 'yesno']) assert.equal(goStringStyle(s), 'plain', s);
    assert.equal(goStringStyle('a\tb'), 'double');
    assert.equal(goStringStyle('a\nb'), 'literal');
  });

  it('resolves plain scalars like yaml.v2', () => {
    assert.equal(resolvePlain('08'), 'float');
    assert.equal(resolvePlain('017'), 'int');
    assert.equal(resolvePlain('1_000'), 'int');
    assert.equal(resolvePlain('9223372036854775808'), 'int');
    assert.equal(resolvePlain('0xFFFFFFFFFFFFFFFFFF'), 'str');
    assert.equal(resolvePlain('2020-13-01'), 'str');
    assert.equal(resolvePlain('2020-01-02T10:11:12Z'), 'timestamp');
    assert.equal(resolvePlain('<<'), 'str'); // the merge key is handled by the parser, not the resolver
  });

  it('writes block collections, flow empties and document ends', () => {
    assert.equal(emitGoYaml({}), '{}\n');
    assert.equal(
      emitGoYaml({ a: [], b: {}, c: [{ x: 1n, y: [{ z: true }] }, 'd'], e: { f: { g: 'h' } } }),
      'a: []\nb: {}\nc:\n- x: 1\n  "y":\n  - z: true\n- d\ne:\n  f:\n    g: h\n',
    );
  });
});

describe('StrictDoc', () => {
  it('reports duplicate and unknown keys with their line', () => {
    const doc = StrictDoc.parse('a: 1\nb: 2\na: 3\n');
    assert.throws(() => doc.mapping(doc.root, 'thing', ['a', 'b']), { message: 'line 3: duplicate key "a" in thing' });
    const doc2 = StrictDoc.parse('a: 1\nc: 2\n');
    assert.throws(() => doc2.mapping(doc2.root, 'thing', ['a', 'b']), (e: unknown) => {
      assert.ok(e instanceof YamlDecodeError);
      assert.equal(e.line, 2);
      assert.equal(e.message, 'line 2: unknown field "c" in thing');
      return true;
    });
  });

  it('reports syntax errors as one line with a line number', () => {
    assert.throws(() => StrictDoc.parse('a: 1\nb: [1, 2\n'), { message: /^line \d+: invalid YAML: [^\n]+$/ });
  });

  it('resolves aliases and treats empty documents as null', () => {
    assert.equal(StrictDoc.parse('').root, null);
    assert.equal(StrictDoc.parse('  \n# only a comment\n').root, null);
    const doc = StrictDoc.parse('a: &x 5s\nb: *x\n');
    const [, b] = doc.mapping(doc.root, 't', ['a', 'b']);
    assert.equal(doc.duration(b!.value, 'b'), 5_000_000_000n);
  });
});
