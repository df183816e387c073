// Unit tests of src/lib/message/uuid.ts: Gazette's v1 message UUIDs. The expected texts were
// worked out from the bit layout by hand (timestamp low/mid/high words, version 1, variant,
// 4-bit counter, 10 flag bits, producer id), and the same inputs given to Go's
// message.BuildUUID of go.gazette.dev/core v0.103.0 printed the same texts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  CLOCK_TICK,
  MessageFlags,
  GREGORIAN_TO_UNIX_100NS,
  MessageClock,
  UUIDFormatError,
  UUIDSequence,
  buildUUID,
  clockFromTime,
  clockFromUnixNanos,
  clockToUnixNanos,
  flagsName,
  formatUUID,
  getClock,
  getFlags,
  getProducerID,
  newProducerID,
  parseUUID,
} from '../../../../src/lib/message/uuid.js';

const hex = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));

interface Vector {
  what: string;
  producer: string;
  clock: bigint;
  flags: number;
  text: string;
}

const VECTORS: Vector[] = [
  {
    // 2019-09-01T02:23:41.981273734Z, rounded down to 100 ns, then two ticks (+2 µs).
    what: 'a 2019 time after two ticks, alternating flag bits',
    producer: '010203040506',
    clock: clockFromUnixNanos(1567304621981273734n) + 2n * CLOCK_TICK,
    flags: 0b1010101010,
    // low word 83fc2f95, mid cc5f, version 1 + high 1e9, variant 10 + counter 0000 + flags 1010101010
    text: '83fc2f95-cc5f-11e9-82aa-010203040506',
  },
  {
    what: 'every clock, counter and flag bit set',
    producer: 'ffffffffffff',
    clock: (1n << 64n) - 1n,
    flags: 0x3ff,
    text: 'ffffffff-ffff-1fff-bfff-ffffffffffff',
  },
  {
    // 2023-11-14T22:13:20Z with counter 5 and CONTINUE_TXN: 0x8000 | 5 << 10 | 1 = 0x9401.
    what: 'a counter of 5 and CONTINUE_TXN',
    producer: '0b0000000001',
    clock: clockFromUnixNanos(1_700_000_000_000_000_000n) | 5n,
    flags: MessageFlags.CONTINUE_TXN,
    text: '04afc000-833b-11ee-9401-0b0000000001',
  },
  {
    what: 'the clock zero (the Gregorian epoch), ACK_TXN',
    producer: '0100000000ff',
    clock: 0n,
    flags: MessageFlags.ACK_TXN,
    text: '00000000-0000-1000-8002-0100000000ff',
  },
];

describe('message UUIDs: build and parse', () => {
  for (const v of VECTORS) {
    it(`builds ${v.what}`, () => {
      const id = buildUUID(hex(v.producer), v.clock, v.flags);
      assert.equal(formatUUID(id), v.text);
      assert.equal(id[6]! >> 4, 1, 'version 1');
      assert.equal(id[8]! >> 6, 0b10, 'RFC 4122 variant');
    });
    it(`parses ${v.what} back`, () => {
      const id = parseUUID(v.text);
      assert.deepEqual([...getProducerID(id)], [...hex(v.producer)]);
      assert.equal(getClock(id), v.clock);
      assert.equal(getFlags(id), v.flags);
      assert.equal(formatUUID(id), v.text);
    });
  }

  it('parses upper-case hex, and refuses other shapes', () => {
    assert.equal(formatUUID(parseUUID('83FC2F95-CC5F-11E9-82AA-010203040506')), '83fc2f95-cc5f-11e9-82aa-010203040506');
    for (const bad of ['', '83fc2f95cc5f11e982aa010203040506', '83fc2f95-cc5f-11e9-82aa-01020304050', '{83fc2f95-cc5f-11e9-82aa-010203040506}', 'g3fc2f95-cc5f-11e9-82aa-010203040506']) {
      assert.throws(() => parseUUID(bad), UUIDFormatError, bad);
    }
  });

  it('refuses flags beyond 10 bits and producer ids that are not 6 bytes', () => {
    assert.throws(() => buildUUID(hex('010203040506'), 0n, 0x400), /low 10 bits/);
    assert.throws(() => buildUUID(hex('010203040506'), 0n, -1), /low 10 bits/);
    assert.throws(() => buildUUID(hex('0102030405'), 0n, 0), /6 bytes/);
    assert.throws(() => getClock(new Uint8Array(15)), /16 bytes/);
  });

  it('names the flags', () => {
    assert.deepEqual([0, 1, 2, 0x2a].map(flagsName), ['OUTSIDE_TXN', 'CONTINUE_TXN', 'ACK_TXN', 'Flags(2a)']);
  });
});

describe('message UUIDs: producers and clocks', () => {
  it('new producer ids are 6 random bytes with the multicast bit set', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const p = newProducerID();
      assert.equal(p.length, 6);
      assert.equal(p[0]! & 1, 1);
      seen.add(Buffer.from(p).toString('hex'));
    }
    assert.equal(seen.size, 200);
  });

  it('a clock is 100 ns ticks since 1582-10-15, shifted by 4', () => {
    assert.equal(clockFromUnixNanos(0n), GREGORIAN_TO_UNIX_100NS << 4n);
    // 12 s + 399 ns is 12 s + 3 ticks of 100 ns: the rest is dropped.
    assert.equal(clockFromUnixNanos(12_000_000_399n), (GREGORIAN_TO_UNIX_100NS + 120_000_003n) << 4n);
    assert.equal(clockToUnixNanos(clockFromUnixNanos(12_000_000_399n)), 12_000_000_300n);
    assert.equal(clockFromTime(new Date(1500)), clockFromUnixNanos(1_500_000_000n));
    assert.equal(clockFromTime(1500), clockFromUnixNanos(1_500_000_000n));
  });

  it('ticks by one microsecond (160) and carries into the high word', () => {
    const c = new MessageClock(0n);
    assert.equal(c.tick(), 160n);
    assert.equal(c.tick(), 320n);
    const near = new MessageClock(0xffff_ffffn - 100n);
    assert.equal(near.tick(), 0xffff_ffffn + 60n);
    assert.equal(near.hi, 1);
  });

  it('moves forward to wall time, never back', () => {
    const c = new MessageClock(clockFromUnixNanos(12_000_000_300n));
    c.tick(); // 12 s + 1300 ns
    c.update(11_000_000_100n);
    assert.equal(clockToUnixNanos(c.value), 12_000_001_300n);
    c.update(12_000_001_000n); // earlier than where the ticks took it
    assert.equal(clockToUnixNanos(c.value), 12_000_001_300n);
    c.update(12_000_005_000n);
    assert.equal(c.value, clockFromUnixNanos(12_000_005_000n));
    c.update(new Date(13_000));
    assert.equal(c.value, clockFromUnixNanos(13_000_000_000n));
    c.update(12_000); // milliseconds, earlier
    assert.equal(c.value, clockFromUnixNanos(13_000_000_000n));
    assert.equal(MessageClock.now(new Date(5)).value, clockFromUnixNanos(5_000_000n));
  });
});

describe('UUIDSequence', () => {
  it('writes the text of each next UUID, ticking its clock once per UUID', () => {
    const producer = hex('0b0000000001');
    const start = clockFromUnixNanos(1_700_000_000_000_000_000n) | 5n;
    const seq = new UUIDSequence(producer, new MessageClock(start));
    const out = Buffer.alloc(3 * 36 + 2, '.');
    let at = 1;
    for (let i = 0; i < 3; i++) at = seq.writeNext(out, at, MessageFlags.CONTINUE_TXN);
    assert.equal(at, 1 + 3 * 36);
    const texts = [1, 2, 3].map((i) => formatUUID(buildUUID(producer, start + BigInt(i) * CLOCK_TICK, MessageFlags.CONTINUE_TXN)));
    assert.equal(out.toString('latin1'), '.' + texts.join('') + '.');
    assert.equal(seq.nextString(), formatUUID(buildUUID(producer, start + 4n * CLOCK_TICK, 0)));
    assert.deepEqual(seq.next(MessageFlags.ACK_TXN), buildUUID(producer, start + 5n * CLOCK_TICK, MessageFlags.ACK_TXN));
  });

  it('matches buildUUID across the low word overflowing', () => {
    const producer = hex('ffffffffffff');
    // A clock just below a 2^32 boundary, with every counter bit set.
    const start = (0x1234_5678n << 32n) | (0xffff_ffffn - 300n) | 0xfn;
    const seq = new UUIDSequence(producer, new MessageClock(start));
    for (let i = 1; i <= 4; i++) {
      assert.equal(seq.nextString(MessageFlags.OUTSIDE_TXN), formatUUID(buildUUID(producer, start + BigInt(i) * CLOCK_TICK, 0)), `tick ${i}`);
    }
  });

  it('parses back to its producer, clock and flags', () => {
    const seq = new UUIDSequence();
    const before = seq.clock.value;
    const id = parseUUID(seq.nextString(MessageFlags.ACK_TXN));
    assert.deepEqual(getProducerID(id), seq.producer);
    assert.equal(getClock(id), before + CLOCK_TICK);
    assert.equal(getFlags(id), MessageFlags.ACK_TXN);
  });
});
