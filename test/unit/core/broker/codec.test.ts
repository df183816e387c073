import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { decodeAppendRequest, decodeReplicateRequest, encodeReplicateContent, encodeReplicateRequest, FastJournalService } from '../../../../src/core/broker/codec.js';
import { AppendRequest, JournalService, ReplicateRequest } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { rng, type Rand, below } from '../../../helpers/random.js';

const int = below;

function bytes(r: Rand, max: number): Buffer {
  const b = Buffer.alloc(int(r, max + 1));
  for (let i = 0; i < b.length; i++) b[i] = int(r, 256);
  return b;
}

/** Content lengths around the varint length boundaries, and 64 KiB. */
const LENGTHS = [0, 1, 127, 128, 16_383, 16_384, 65_536, 200_000];
/** Deltas around varint boundaries, up to and past the 49 bits the fast path reads. */
const DELTAS = [0, 1, 127, 128, 65_536, 2 ** 35, 2 ** 49 - 1, 2 ** 49, 2 ** 53 - 1];

function enc(r: Partial<ReplicateRequest>): Buffer {
  return Buffer.from(ReplicateRequest.encode(ReplicateRequest.fromPartial(r)).finish());
}

describe('broker codec: content messages of Append and Replicate', () => {
  it('encodes {content, content_delta} exactly as the generated encoder', () => {
    const r = rng(7);
    for (const len of LENGTHS) {
      for (const delta of DELTAS) {
        const content = Buffer.alloc(len, int(r, 256));
        assert.deepEqual(encodeReplicateContent(content, delta), enc({ content, content_delta: BigInt(delta) }), `len ${len} delta ${delta}`);
      }
    }
    assert.throws(() => encodeReplicateContent(Buffer.alloc(1), -1), RangeError);
    assert.throws(() => encodeReplicateContent(Buffer.alloc(1), 2 ** 53), RangeError);
  });

  it('encodes any other ReplicateRequest with the generated encoder', () => {
    const req: Partial<ReplicateRequest> = {
      proposal: { journal: 'a/b', begin: 1n, end: 9n, sum: { part1: 1n, part2: 2n, part3: 3 }, compression_codec: 1, backing_store: '', mod_time: 0n, path_postfix: '' },
      registers: { labels: [{ name: 'n', value: 'v', prefix: false }] },
      acknowledge: true,
    };
    assert.deepEqual(encodeReplicateRequest(req), enc(req));
  });

  it('decodes content messages as the generated decoders do, the content a view of the input', () => {
    for (const len of LENGTHS) {
      for (const delta of DELTAS) {
        const content = Buffer.alloc(len, 0x61);
        const wire = enc({ content, content_delta: BigInt(delta) });
        const got = decodeReplicateRequest(wire);
        assert.deepEqual(got, ReplicateRequest.decode(wire), `len ${len} delta ${delta}`);
        if (len > 0 && delta < 2 ** 49) assert.equal(got.content.buffer, wire.buffer, 'content is not copied');
      }
      const wire = Buffer.from(AppendRequest.encode(AppendRequest.fromPartial({ content: Buffer.alloc(len, 0x62) })).finish());
      const got = decodeAppendRequest(wire);
      assert.deepEqual(got, AppendRequest.decode(wire));
      if (len > 0) assert.equal(got.content.buffer, wire.buffer, 'content is not copied');
    }
  });

  it('decodes every other message (first messages, proposals, odd encodings) as the generated decoders do', () => {
    const fixed: Buffer[] = [
      Buffer.alloc(0),
      Buffer.from(AppendRequest.encode(AppendRequest.fromPartial({ journal: 'a/b', do_not_proxy: true, offset: 5n, suspend: 2 })).finish()),
      Buffer.from(AppendRequest.encode(AppendRequest.fromPartial({ journal: 'a/b', content: Buffer.from('x') })).finish()),
      enc({ content: Buffer.from('xy'), content_delta: 3n, acknowledge: true }),
      enc({ content: Buffer.from('xy'), content_delta: -1n }),
      enc({ content_delta: 3n }),
      // content twice (the last wins), delta before content, a two-byte length for one byte
      Buffer.from([0x22, 0x01, 0x61, 0x22, 0x02, 0x62, 0x63]),
      Buffer.from([0x28, 0x05, 0x22, 0x01, 0x61]),
      Buffer.from([0x22, 0x81, 0x00, 0x61]),
    ];
    for (const wire of fixed) {
      assert.deepEqual(decodeReplicateRequest(wire), ReplicateRequest.decode(wire), wire.toString('hex'));
      let want: AppendRequest | Error;
      try {
        want = AppendRequest.decode(wire);
      } catch (e) {
        want = e as Error;
      }
      if (want instanceof Error) assert.throws(() => decodeAppendRequest(wire));
      else assert.deepEqual(decodeAppendRequest(wire), want, wire.toString('hex'));
    }
  });

  it('agrees with the generated decoders on mutated and truncated messages', () => {
    for (let seed = 1; seed <= 400; seed++) {
      const r = rng(seed);
      const base = seed % 2 ? enc({ content: bytes(r, 300), content_delta: BigInt(int(r, 2 ** 20)) }) : Buffer.from(AppendRequest.encode(AppendRequest.fromPartial({ content: bytes(r, 300) })).finish());
      const wire = Buffer.from(base);
      for (let k = int(r, 3); k >= 0; k--) if (wire.length > 0) wire[int(r, wire.length)] = int(r, 256);
      const cut = seed % 5 === 0 ? wire.subarray(0, int(r, wire.length + 1)) : wire;
      for (const [fast, slow] of [
        [decodeReplicateRequest, ReplicateRequest.decode],
        [decodeAppendRequest, AppendRequest.decode],
      ] as const) {
        let want: unknown;
        try {
          want = slow(cut);
        } catch (e) {
          want = e;
        }
        if (want instanceof Error) assert.throws(() => fast(cut), `seed ${seed}`);
        else assert.deepEqual(fast(cut), want, `seed ${seed}`);
      }
    }
  });

  it('serves Append and Replicate with these decoders, everything else as generated', () => {
    const wire = enc({ content: Buffer.from('abc'), content_delta: 4n });
    assert.deepEqual(FastJournalService.replicate.requestDeserialize(wire), ReplicateRequest.decode(wire));
    assert.equal(FastJournalService.replicate.path, JournalService.replicate.path);
    assert.equal(FastJournalService.append.path, JournalService.append.path);
    assert.equal(FastJournalService.read, JournalService.read);
    assert.equal(FastJournalService.list, JournalService.list);
  });
});
