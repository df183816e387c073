// Unit tests of src/lib/message/attach-uuids.ts: the line templates, and attaching UUIDs to lines
// split as Go's bufio.Scanner splits them, over any chunking of the input.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  DEFAULT_LINE_TEMPLATE,
  LineTemplateError,
  LineTooLongError,
  attachUUIDs,
  compileLineTemplate,
  renderLine,
  type LineInput,
} from '../../../../src/lib/message/attach-uuids.js';
import { CLOCK_TICK, MessageFlags, MessageClock, UUIDSequence, buildUUID, formatUUID, getClock, getFlags, getProducerID, parseUUID } from '../../../../src/lib/message/uuid.js';

const U = '83fc2f95-cc5f-11e9-82aa-010203040506';
const render = (t: string, line: string) => renderLine(compileLineTemplate(t), U, line).toString('utf8');

describe('line templates', () => {
  it('substitute .UUID and .Line into the text around them', () => {
    assert.equal(render(DEFAULT_LINE_TEMPLATE, 'a,b'), `${U},a,b\n`);
    assert.equal(render('{{.Line}},{{.UUID}}\n', 'x'), `x,${U}\n`);
    assert.equal(render('{"uuid":"{{ .UUID }}","record":{{.Line}}}\n', '{"a":1}'), `{"uuid":"${U}","record":{"a":1}}\n`);
    assert.equal(render('{{.Line}}{{.Line}}', 'ab'), 'abab');
    assert.equal(render('no fields\n', 'ignored'), 'no fields\n');
    assert.equal(render('', 'ignored'), '');
    assert.equal(render('}} {{.Line}}', 'x'), '}} x');
  });

  it('drop comments and trim around trim markers as Go does', () => {
    assert.equal(render('a {{- .Line -}} \n b', 'x'), 'axb');
    assert.equal(render('{{/* a comment */}}a{{- /* another */ -}} b', 'x'), 'ab');
    assert.equal(render('x\t {{- .Line}} \n', 'y'), 'xy \n');
    assert.equal(render('{{.UUID -}}\n\n{{.Line}}', 'y'), `${U}y`);
    assert.equal(render('{{/* "}}" */}}{{.Line}}', 'y'), 'y', 'a comment may hold the closing delimiter');
  });

  it('refuse every other action, naming it', () => {
    const cases: [string, RegExp][] = [
      ['{{printf "%s" .Line}}\n', /unsupported template action \{\{printf "%s" \.Line\}\} at line 1, column 1/],
      ['x\n{{.Foo}}', /unsupported template action \{\{\.Foo\}\} at line 2, column 1/],
      ['{{.}}', /unsupported template action \{\{\.\}\}/],
      ['{{if .Line}}x{{end}}', /unsupported template action \{\{if \.Line\}\}/],
      ['{{.UUID | printf "%q"}}', /unsupported/],
      ['{{-.Line}}', /unsupported template action \{\{-\.Line\}\}/],
      ['{{.Line', /unclosed action at line 1, column 1/],
      ['{{/* open', /unclosed comment/],
      ['{{/* c */ x}}', /comment ends before the closing delimiter/],
    ];
    for (const [t, re] of cases) assert.throws(() => compileLineTemplate(t), (e: unknown) => e instanceof LineTemplateError && re.test((e as Error).message), t);
  });
});

/** A sequence with a fixed producer and start, and the UUID text of its n-th tick. */
function fixed(): { seq: UUIDSequence; nth(n: number): string } {
  const producer = new Uint8Array(Buffer.from('0b0000000001', 'hex'));
  const start = 2227086848000000005n;
  return {
    seq: new UUIDSequence(producer, new MessageClock(start)),
    nth: (n) => formatUUID(buildUUID(producer, start + BigInt(n) * CLOCK_TICK, 0)),
  };
}

async function* chunked(bytes: Buffer, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

async function run(
  inputs: (string | Buffer)[],
  o: { template?: string; maxLength?: number; skipHeader?: boolean; chunk?: number; outChunk?: number } = {},
): Promise<{ out: string; chunks: number; lines: number; nth(n: number): string }> {
  const { seq, nth } = fixed();
  const parts: Buffer[] = [];
  const ins: LineInput[] = inputs.map((s, i) => {
    const b = Buffer.from(s);
    return { name: `in${i}`, chunks: chunked(b, o.chunk ?? Math.max(b.length, 1)) };
  });
  const res = await attachUUIDs(ins, (c) => void parts.push(c), {
    template: compileLineTemplate(o.template ?? '{{.UUID}} {{.Line}}|'),
    maxLength: o.maxLength ?? 4_194_304,
    skipHeader: o.skipHeader,
    sequence: seq,
    now: () => 0, // 1970: never ahead of the clock, so only ticks move it
    chunkSize: o.outChunk,
  });
  return { out: Buffer.concat(parts).toString('latin1'), chunks: parts.length, lines: res.lines, nth };
}

describe('attachUUIDs', () => {
  it('splits lines as bufio.Scanner: \\n ends a line, \\r before it is dropped, a last line without \\n counts, empty lines count', async () => {
    const r = await run(['a\r\nb\n\nc\rd\ne']);
    assert.equal(r.lines, 5);
    assert.equal(r.out, `${r.nth(1)} a|${r.nth(2)} b|${r.nth(3)} |${r.nth(4)} c\rd|${r.nth(5)} e|`);
    assert.equal((await run(['x\r'])).out, `${fixed().nth(1)} x|`, 'a \\r at the end of input is dropped too');
    assert.equal((await run([''])).out, '');
    assert.equal((await run(['\n'])).lines, 1);
  });

  it('gives the same output however the input is chunked', async () => {
    const text = 'first line\r\nsecond\n\nfourth, longer than a chunk or two\nlast';
    const whole = await run([text]);
    for (const size of [1, 2, 3, 7, 16]) {
      const r = await run([text], { chunk: size });
      assert.equal(r.out, whole.out, `chunks of ${size}`);
    }
  });

  it('hands its output on in chunks of the size asked, lines whole where they fit', async () => {
    const lines = Array.from({ length: 50 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const r = await run([lines], { outChunk: 100, template: '{{.Line}}\n' });
    assert.equal(r.out, lines);
    assert.ok(r.chunks >= 4, `${r.chunks} chunks`);
    const big = await run(['x'.repeat(500) + '\n'], { outChunk: 100, template: '{{.Line}}\n' });
    assert.equal(big.out, 'x'.repeat(500) + '\n', 'a line longer than a chunk goes out whole');
  });

  it('ticks one clock for all inputs, and skips the first line of each with skipHeader', async () => {
    const r = await run(['h1\na\nb\n', 'h2\nc', '', 'h4'], { skipHeader: true });
    assert.equal(r.out, `${r.nth(1)} a|${r.nth(2)} b|${r.nth(3)} c|`);
    const all = await run(['h1\na\n', 'h2\nc'], {});
    assert.equal(all.lines, 4);
  });

  it('UUIDs carry the producer, consecutive clocks, and OUTSIDE_TXN', async () => {
    const seq = new UUIDSequence();
    const start = seq.clock.value;
    const parts: Buffer[] = [];
    await attachUUIDs([{ name: 'x', chunks: chunked(Buffer.from('a\nb\nc\n'), 64) }], (c) => void parts.push(c), {
      template: compileLineTemplate(DEFAULT_LINE_TEMPLATE),
      maxLength: 100,
      sequence: seq,
      now: () => 0,
    });
    const ids = Buffer.concat(parts).toString().trimEnd().split('\n').map((l) => parseUUID(l.split(',')[0]!));
    assert.deepEqual(ids.map((id) => getClock(id) - start), [160n, 320n, 480n]);
    for (const id of ids) {
      assert.deepEqual(getProducerID(id), seq.producer);
      assert.equal(getFlags(id), MessageFlags.OUTSIDE_TXN);
    }
  });

  it('moves the clock forward to wall time as input arrives', async () => {
    const seq = new UUIDSequence(undefined, new MessageClock(0n));
    let t = 1_000;
    const parts: Buffer[] = [];
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield Buffer.from('a\n');
      t = 2_000;
      yield Buffer.from('b\n');
    }
    await attachUUIDs([{ name: 'x', chunks: slow() }], (c) => void parts.push(c), {
      template: compileLineTemplate('{{.UUID}}\n'),
      maxLength: 100,
      sequence: seq,
      now: () => t,
    });
    const clocks = Buffer.concat(parts).toString().trimEnd().split('\n').map((l) => getClock(parseUUID(l)));
    assert.deepEqual(clocks, [new MessageClock(0n), new MessageClock(0n)].map((c, i) => (c.update(i === 0 ? 1_000 : 2_000), c.tick())));
  });

  it('a line and its newline must fit in maxLength; lines before a longer one are written first', async () => {
    // maxLength 4: "abc\n" fits, "abcd\n" does not; an unterminated last line of 3 fits, of 4 does not.
    assert.equal((await run(['abc\nxyz'], { maxLength: 4, template: '{{.Line}}|' })).out, 'abc|xyz|');
    for (const [input, line] of [
      ['ok\nabcd\nnext\n', 2],
      ['ok\nabcd', 2],
      ['abcdefghij', 1],
      ['abcd\r\n', 1],
    ] as const) {
      for (const chunk of [1, 3, 100]) {
        const parts: Buffer[] = [];
        await assert.rejects(
          attachUUIDs([{ name: 'in.txt', chunks: chunked(Buffer.from(input), chunk) }], (c) => void parts.push(c), {
            template: compileLineTemplate('{{.Line}}|'),
            maxLength: 4,
            sequence: fixed().seq,
          }),
          (e: unknown) => e instanceof LineTooLongError && e.line === line && /^line \d of in\.txt is too long \(a line, counting its newline, may be at most 4 bytes\)$/.test(e.message),
          `${JSON.stringify(input)} in chunks of ${chunk}`,
        );
        assert.equal(Buffer.concat(parts).toString(), line === 2 ? 'ok|' : '', `${JSON.stringify(input)}: output before the error`);
      }
    }
  });
});
