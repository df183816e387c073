import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { frameMessage, MessageDeframer, messagePrefix } from '../../../../src/lib/protocol/grpc-frame.js';

/** A stream of framed messages of the given lengths, each filled with its own byte pattern. */
function stream(lengths: number[]): { bytes: Buffer; messages: Buffer[] } {
  const messages = lengths.map((n, i) => Buffer.from(Array.from({ length: n }, (_, j) => (i * 31 + j * 7) & 0xff)));
  const framed = Buffer.concat(messages.map((m) => frameMessage(m)));
  // A buffer of its own (not a slice of Node's shared pool), so that a view can be told from a copy.
  const bytes = Buffer.allocUnsafeSlow(framed.length);
  framed.copy(bytes);
  return { bytes, messages };
}

/** Feeds `bytes` cut at `cuts` and collects what the deframer hands out. */
function feed(d: MessageDeframer, bytes: Buffer, cuts: number[]): { out: Buffer[]; views: number } {
  const out: Buffer[] = [];
  let views = 0;
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    const chunk = bytes.subarray(at, c);
    at = c;
    const problem = d.push(chunk, (m) => {
      const inChunk = m.buffer === chunk.buffer && m.byteOffset >= chunk.byteOffset && m.byteOffset + m.length <= chunk.byteOffset + chunk.length;
      if (inChunk) views++;
      out.push(Buffer.from(m));
      return true;
    });
    assert.equal(problem, undefined);
  }
  return { out, views };
}

describe('MessageDeframer', () => {
  it('hands out every message in order, whatever the chunk boundaries (every single cut and random multi-cuts)', () => {
    const { bytes, messages } = stream([0, 1, 4, 5, 6, 300, 0, 17]);
    for (let c = 0; c <= bytes.length; c++) {
      assert.deepEqual(feed(new MessageDeframer(), bytes, [c]).out, messages, `cut at ${c}`);
    }
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
    for (let round = 0; round < 200; round++) {
      const cuts = Array.from({ length: 1 + rand(12) }, () => rand(bytes.length + 1)).sort((a, b) => a - b);
      assert.deepEqual(feed(new MessageDeframer(), bytes, cuts).out, messages, `cuts ${cuts.join(',')}`);
    }
    // One byte at a time.
    assert.deepEqual(feed(new MessageDeframer(), bytes, Array.from({ length: bytes.length }, (_, i) => i)).out, messages);
  });

  it('hands out a message that lies whole in one chunk as a view of it, and copies one spread over chunks', () => {
    const { bytes } = stream([10, 20]);
    assert.equal(feed(new MessageDeframer(), bytes, []).views, 2);
    // Cut inside the second message's body: the first is a view, the second a copy.
    assert.equal(feed(new MessageDeframer(), bytes, [5 + 10 + 5 + 3]).views, 1);
  });

  it('stops where deliver returns false', () => {
    const { bytes, messages } = stream([3, 3, 3]);
    const got: Buffer[] = [];
    const d = new MessageDeframer();
    assert.equal(d.push(bytes, (m) => (got.push(Buffer.from(m)), got.length < 2)), undefined);
    assert.deepEqual(got, messages.slice(0, 2));
  });

  it('refuses a compressed message, and one over its bound as soon as its prefix is read', () => {
    const compressed = Buffer.concat([Buffer.from([1, 0, 0, 0, 2]), Buffer.from([9, 9])]);
    assert.deepEqual(new MessageDeframer().push(compressed, () => true), { kind: 'compressed' });
    const d = new MessageDeframer(100);
    let delivered = 0;
    assert.equal(d.push(messagePrefix(100).subarray(0, 3), () => true), undefined);
    assert.deepEqual(
      new MessageDeframer(100).push(messagePrefix(101), () => (delivered++, true)),
      { kind: 'too-large', length: 101 },
    );
    assert.equal(delivered, 0);
    // Exactly at the bound is fine.
    const ok = new MessageDeframer(4);
    const got: number[] = [];
    assert.equal(ok.push(frameMessage(Buffer.from([1, 2, 3, 4])), (m) => (got.push(m.length), true)), undefined);
    assert.deepEqual(got, [4]);
  });
});
