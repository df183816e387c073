import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { decodeFragmentsResponse, decodeListResponse, decodeShardListResponse, decodeShardSummaries, summarizeShardList } from '../../../../src/lib/protocol/fast-decode.js';
import {
  FragmentsResponse,
  ListResponse,
  type FragmentsResponse__Fragment,
  type ListResponse_Journal,
} from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { ListResponse as ShardListResponse, type ListResponse_Shard } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import { rng, type Rand, below, chance } from '../../../helpers/random.js';

const int = below;

const ALPHABETS = ['abcdefghijklmnopqrstuvwxyz/-_.=0123456789', 'Zürich-東京-ß-é', '\uFEFF\u0000\u007f\u0080😀'];

function str(r: Rand, max = 40): string {
  if (chance(r, 0.15)) return '';
  const alpha = ALPHABETS[chance(r, 0.8) ? 0 : int(r, ALPHABETS.length)]!;
  const chars = Array.from(alpha);
  let s = '';
  const n = 1 + int(r, max);
  for (let i = 0; i < n; i++) s += chars[int(r, chars.length)];
  return s;
}

/** A bigint spread over small, 2^49-ish and full 64-bit magnitudes, signed or not. */
function big(r: Rand, signed: boolean): bigint {
  const k = int(r, 6);
  if (k === 0) return 0n;
  if (k === 1) return BigInt(int(r, 1000));
  if (k === 2) return BigInt(int(r, 2 ** 30)) * BigInt(1 + int(r, 2 ** 22));
  if (k === 3) return 2n ** 49n - 1n + BigInt(int(r, 3));
  const v = (BigInt(int(r, 2 ** 32)) << 32n) | BigInt(int(r, 2 ** 32));
  return signed ? BigInt.asIntN(64, v) : v;
}

function i32(r: Rand): number {
  const k = int(r, 5);
  if (k === 0) return 0;
  if (k === 1) return -1;
  if (k === 2) return int(r, 200);
  if (k === 3) return int(r, 2 ** 31) | 0;
  return -int(r, 2 ** 31);
}

const maybe = <T>(r: Rand, f: () => T): T | undefined => (chance(r, 0.7) ? f() : undefined);

function duration(r: Rand) {
  return { seconds: big(r, true), nanos: i32(r) };
}

function journal(r: Rand): ListResponse_Journal {
  return {
    spec: maybe(r, () => ({
      name: str(r, 60),
      replication: i32(r),
      labels: maybe(r, () => ({
        labels: Array.from({ length: int(r, 5) }, () => ({ name: str(r), value: str(r), prefix: chance(r, 0.3) })),
      })),
      fragment: maybe(r, () => ({
        length: big(r, true),
        compression_codec: int(r, 6),
        stores: Array.from({ length: int(r, 3) }, () => str(r)),
        refresh_interval: maybe(r, () => duration(r)),
        retention: maybe(r, () => duration(r)),
        flush_interval: maybe(r, () => duration(r)),
        path_postfix_template: str(r),
      })),
      flags: chance(r, 0.5) ? int(r, 8) : int(r, 2 ** 32),
      max_append_rate: big(r, true),
      suspend: maybe(r, () => ({ level: int(r, 3), offset: big(r, true) })),
    })),
    mod_revision: big(r, true),
    route: maybe(r, () => ({
      members: Array.from({ length: int(r, 4) }, () => ({ zone: str(r), suffix: str(r) })),
      primary: i32(r),
      endpoints: Array.from({ length: int(r, 4) }, () => str(r)),
    })),
    create_revision: big(r, true),
  };
}

function listResponse(r: Rand): ListResponse {
  return {
    status: chance(r, 0.8) ? 0 : i32(r),
    header: maybe(r, () => ({
      process_id: maybe(r, () => ({ zone: str(r), suffix: str(r) })),
      route: maybe(r, () => ({ members: [{ zone: str(r), suffix: str(r) }], primary: i32(r), endpoints: [str(r)] })),
      etcd: maybe(r, () => ({ cluster_id: big(r, false), member_id: big(r, false), revision: big(r, true), raft_term: big(r, false) })),
    })),
    journals: Array.from({ length: int(r, 12) }, () => journal(r)),
  };
}

function encode(m: ListResponse): Buffer {
  return Buffer.from(ListResponse.encode(m).finish());
}

/** Both decoders on `bytes`: the same message, or both throw the same error. */
function same(bytes: Uint8Array, what: string): void {
  let want: ListResponse | undefined;
  let wantErr: unknown;
  try {
    want = ListResponse.decode(bytes);
  } catch (err) {
    wantErr = err;
  }
  if (wantErr !== undefined) {
    assert.throws(() => decodeListResponse(bytes), { message: (wantErr as Error).message }, what);
    return;
  }
  assert.deepStrictEqual(decodeListResponse(bytes), want, what);
}

describe('decodeListResponse', () => {
  it('decodes random messages exactly as the generated decoder', () => {
    for (let seed = 1; seed <= 1500; seed++) {
      const r = rng(seed);
      const m = listResponse(r);
      const bytes = encode(m);
      const got = decodeListResponse(bytes);
      assert.deepStrictEqual(got, ListResponse.decode(bytes), `seed ${seed}`);
      // Encoding drops default-valued fields; the round trip restores exactly that message.
      assert.deepStrictEqual(got, ListResponse.decode(encode(got)), `seed ${seed} round trip`);
    }
  });

  it('matches the generated decoder on mutated, truncated and extended messages', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed * 7919);
      const bytes = encode(listResponse(r));
      const m = Buffer.from(bytes);
      const k = int(r, 5);
      let mutated: Buffer;
      if (k === 0 && m.length > 0) {
        // Flip a few random bytes (tags, lengths, varints and string bytes alike).
        for (let i = 0, n = 1 + int(r, 3); i < n; i++) m[int(r, m.length)] = int(r, 256);
        mutated = m;
      } else if (k === 1) {
        mutated = m.subarray(0, int(r, m.length + 1));
      } else if (k === 2) {
        // An unknown field (number 100, varint) at the top level.
        mutated = Buffer.concat([m, Buffer.from([0xa0, 0x06, 0x01])]);
      } else if (k === 3) {
        // Random trailing bytes.
        mutated = Buffer.concat([m, Buffer.from(Array.from({ length: 1 + int(r, 6) }, () => int(r, 256)))]);
      } else {
        // Invalid UTF-8 inside string fields: replace every 'a' byte by a lone continuation byte.
        for (let i = 0; i < m.length; i++) if (m[i] === 0x61 && chance(r, 0.5)) m[i] = 0x80 | int(r, 0x40);
        mutated = m;
      }
      same(mutated, `seed ${seed} mutation ${k}`);
    }
  });

  it('decodes a broker-shaped listing (a header then a thousand journals) without the generated decoder', () => {
    const journals: ListResponse_Journal[] = [];
    for (let i = 0; i < 1000; i++) {
      journals.push({
        spec: {
          name: `acme/part-${i % 20}/journal-${i}`,
          replication: 1,
          labels: { labels: [{ name: 'app', value: 'billing', prefix: false }, { name: 'content-type', value: 'application/x-ndjson', prefix: false }] },
          fragment: {
            length: 67108864n,
            compression_codec: 1,
            stores: ['file:///'],
            refresh_interval: { seconds: 60n, nanos: 0 },
            retention: undefined,
            flush_interval: { seconds: 600n, nanos: 0 },
            path_postfix_template: '',
          },
          flags: 4,
          max_append_rate: 0n,
          suspend: undefined,
        },
        mod_revision: BigInt(1000 + i),
        route: { members: [{ zone: 'local', suffix: 'broker-0' }], primary: i % 2 === 0 ? 0 : -1, endpoints: ['http://127.0.0.1:8080'] },
        create_revision: BigInt(900 + i),
      });
    }
    const m: ListResponse = {
      status: 0,
      header: {
        process_id: { zone: 'local', suffix: 'broker-0' },
        route: { members: [], primary: -1, endpoints: [] },
        etcd: { cluster_id: 0xf1e2d3c4b5a69788n, member_id: 0x8877665544332211n, revision: 12345n, raft_term: 2n },
      },
      journals,
    };
    const bytes = encode(m);
    const original = ListResponse.decode;
    let slow = 0;
    ListResponse.decode = (...args) => {
      slow++;
      return original(...args);
    };
    try {
      assert.deepStrictEqual(decodeListResponse(bytes), m);
    } finally {
      ListResponse.decode = original;
    }
    assert.equal(slow, 0, 'the broker-shaped message took the generated decoder');
  });

  it('decodes many distinct repeated-field strings (more than its string cache holds) exactly', () => {
    // Label values, stores, zones and endpoints go through a cache of shared strings: values
    // that collide in it or push each other out must still come out right, message after message.
    for (let round = 0; round < 3; round++) {
      const journals: ListResponse_Journal[] = [];
      for (let i = 0; i < 3000; i++) {
        const v = `v${(i * 7919 + round) % 2500}`;
        journals.push({
          spec: {
            name: `j/${i}`,
            replication: 1,
            labels: { labels: [{ name: `k${i % 3}`, value: v, prefix: false }, { name: 'same', value: v.slice(0, 2), prefix: true }] },
            fragment: {
              length: BigInt(i),
              compression_codec: 1,
              stores: [`s3://b/${v}/`, `s3://b/${v}`],
              refresh_interval: { seconds: BigInt(i % 300), nanos: 0 },
              retention: undefined,
              flush_interval: undefined,
              path_postfix_template: i % 2 ? v : '',
            },
            flags: 0,
            max_append_rate: BigInt(i % 257),
            suspend: undefined,
          },
          mod_revision: BigInt(100000 + i),
          route: { members: [{ zone: `z${i % 5}`, suffix: v }], primary: 0, endpoints: [`http://${v}:8080`] },
          create_revision: BigInt(100000 + (i % 256)),
        });
      }
      const bytes = encode({ status: 0, header: undefined, journals });
      assert.deepStrictEqual(decodeListResponse(bytes), ListResponse.decode(bytes), `round ${round}`);
    }
  });

  it('takes any Uint8Array, not only a Buffer', () => {
    const bytes = encode(listResponse(rng(42)));
    const copy = new Uint8Array(bytes.length + 3).subarray(3);
    copy.set(bytes);
    assert.deepStrictEqual(decodeListResponse(copy), ListResponse.decode(bytes));
  });
});

// ---- FragmentsResponse ------------------------------------------------------------------------

function listedFragment(r: Rand): FragmentsResponse__Fragment {
  return {
    spec: maybe(r, () => ({
      journal: str(r, 60),
      begin: big(r, true),
      end: big(r, true),
      sum: maybe(r, () => ({ part1: big(r, false), part2: big(r, false), part3: chance(r, 0.2) ? 0 : int(r, 2 ** 32) })),
      compression_codec: chance(r, 0.9) ? int(r, 6) : i32(r),
      backing_store: str(r),
      mod_time: big(r, true),
      path_postfix: str(r),
    })),
    signed_url: chance(r, 0.7) ? '' : str(r, 80),
  };
}

function fragmentsResponse(r: Rand): FragmentsResponse {
  return {
    status: chance(r, 0.8) ? 0 : i32(r),
    header: maybe(r, () => ({
      process_id: maybe(r, () => ({ zone: str(r), suffix: str(r) })),
      route: maybe(r, () => ({ members: [{ zone: str(r), suffix: str(r) }], primary: i32(r), endpoints: [str(r)] })),
      etcd: maybe(r, () => ({ cluster_id: big(r, false), member_id: big(r, false), revision: big(r, true), raft_term: big(r, false) })),
    })),
    fragments: Array.from({ length: int(r, 12) }, () => listedFragment(r)),
    next_page_token: big(r, true),
  };
}

function encodeFragments(m: FragmentsResponse): Buffer {
  return Buffer.from(FragmentsResponse.encode(m).finish());
}

function sameFragments(bytes: Uint8Array, what: string): void {
  let want: FragmentsResponse | undefined;
  let wantErr: unknown;
  try {
    want = FragmentsResponse.decode(bytes);
  } catch (err) {
    wantErr = err;
  }
  if (wantErr !== undefined) {
    assert.throws(() => decodeFragmentsResponse(bytes), { message: (wantErr as Error).message }, what);
    return;
  }
  assert.deepStrictEqual(decodeFragmentsResponse(bytes), want, what);
}

describe('decodeFragmentsResponse', () => {
  it('decodes random messages exactly as the generated decoder', () => {
    for (let seed = 1; seed <= 1500; seed++) {
      const r = rng(seed * 31);
      const bytes = encodeFragments(fragmentsResponse(r));
      const got = decodeFragmentsResponse(bytes);
      assert.deepStrictEqual(got, FragmentsResponse.decode(bytes), `seed ${seed}`);
      assert.deepStrictEqual(got, FragmentsResponse.decode(encodeFragments(got)), `seed ${seed} round trip`);
    }
  });

  it('matches the generated decoder on mutated, truncated and extended messages', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed * 104729);
      const m = Buffer.from(encodeFragments(fragmentsResponse(r)));
      const k = int(r, 5);
      let mutated: Buffer;
      if (k === 0 && m.length > 0) {
        for (let i = 0, n = 1 + int(r, 3); i < n; i++) m[int(r, m.length)] = int(r, 256);
        mutated = m;
      } else if (k === 1) {
        mutated = m.subarray(0, int(r, m.length + 1));
      } else if (k === 2) {
        mutated = Buffer.concat([m, Buffer.from([0xa0, 0x06, 0x01])]);
      } else if (k === 3) {
        mutated = Buffer.concat([m, Buffer.from(Array.from({ length: 1 + int(r, 6) }, () => int(r, 256)))]);
      } else {
        for (let i = 0; i < m.length; i++) if (m[i] === 0x61 && chance(r, 0.5)) m[i] = 0x80 | int(r, 0x40);
        mutated = m;
      }
      sameFragments(mutated, `seed ${seed} mutation ${k}`);
    }
  });

  it('decodes a broker-shaped page (a header, a thousand persisted fragments, a page token) without the generated decoder', () => {
    const fragments: FragmentsResponse__Fragment[] = [];
    for (let i = 0; i < 1000; i++) {
      fragments.push({
        spec: {
          journal: 'acme/recovery/shard-000',
          begin: BigInt(i * 4096),
          end: BigInt((i + 1) * 4096),
          sum: { part1: 0xfedcba9876543210n + BigInt(i), part2: BigInt(i) * 0x1000193n, part3: (i * 2654435761) >>> 0 },
          compression_codec: 1,
          backing_store: 'file:///',
          mod_time: BigInt(1_764_000_000 + i),
          path_postfix: i % 3 === 0 ? 'date=2026-12-04' : '',
        },
        signed_url: '',
      });
    }
    const m: FragmentsResponse = {
      status: 0,
      header: {
        process_id: { zone: 'local', suffix: 'broker-0' },
        route: { members: [{ zone: 'local', suffix: 'broker-0' }], primary: 0, endpoints: ['http://127.0.0.1:8080'] },
        etcd: { cluster_id: 0xf1e2d3c4b5a69788n, member_id: 0x8877665544332211n, revision: 12345n, raft_term: 2n },
      },
      fragments,
      next_page_token: 4096000n,
    };
    const bytes = encodeFragments(m);
    const original = FragmentsResponse.decode;
    let slow = 0;
    FragmentsResponse.decode = (...args) => {
      slow++;
      return original(...args);
    };
    try {
      assert.deepStrictEqual(decodeFragmentsResponse(bytes), m);
    } finally {
      FragmentsResponse.decode = original;
    }
    assert.equal(slow, 0, 'the broker-shaped page took the generated decoder');
  });

  it('takes any Uint8Array, not only a Buffer', () => {
    const bytes = encodeFragments(fragmentsResponse(rng(7)));
    const copy = new Uint8Array(bytes.length + 5).subarray(5);
    copy.set(bytes);
    assert.deepStrictEqual(decodeFragmentsResponse(copy), FragmentsResponse.decode(bytes));
  });
});

// ---- the consumer's shard ListResponse --------------------------------------------------------

function listedShard(r: Rand): ListResponse_Shard {
  return {
    spec: maybe(r, () => ({
      id: str(r, 60),
      sources: Array.from({ length: int(r, 4) }, () => ({ journal: str(r), min_offset: big(r, true) })),
      recovery_log_prefix: str(r),
      hint_prefix: str(r),
      hint_backups: i32(r),
      max_txn_duration: maybe(r, () => duration(r)),
      min_txn_duration: maybe(r, () => duration(r)),
      disable: chance(r, 0.5),
      hot_standbys: chance(r, 0.8) ? int(r, 4) : int(r, 2 ** 32),
      labels: maybe(r, () => ({
        labels: Array.from({ length: int(r, 5) }, () => ({ name: str(r), value: str(r), prefix: chance(r, 0.3) })),
      })),
      disable_wait_for_ack: chance(r, 0.3),
      ring_buffer_size: chance(r, 0.7) ? 0 : int(r, 2 ** 32),
      read_channel_size: chance(r, 0.7) ? 0 : int(r, 2 ** 32),
    })),
    mod_revision: big(r, true),
    route: maybe(r, () => ({
      members: Array.from({ length: int(r, 4) }, () => ({ zone: str(r), suffix: str(r) })),
      primary: i32(r),
      endpoints: Array.from({ length: int(r, 4) }, () => str(r)),
    })),
    status: Array.from({ length: int(r, 4) }, () => ({ code: chance(r, 0.8) ? 100 * int(r, 5) : i32(r), errors: Array.from({ length: int(r, 3) }, () => str(r, 80)) })),
    create_revision: big(r, true),
  };
}

function shardList(r: Rand): ShardListResponse {
  return {
    status: chance(r, 0.8) ? 0 : i32(r),
    header: maybe(r, () => ({
      process_id: maybe(r, () => ({ zone: str(r), suffix: str(r) })),
      route: maybe(r, () => ({ members: [{ zone: str(r), suffix: str(r) }], primary: i32(r), endpoints: [str(r)] })),
      etcd: maybe(r, () => ({ cluster_id: big(r, false), member_id: big(r, false), revision: big(r, true), raft_term: big(r, false) })),
    })),
    shards: Array.from({ length: int(r, 12) }, () => listedShard(r)),
    extension: chance(r, 0.8) ? Buffer.alloc(0) : Buffer.from(str(r), 'utf8'),
  };
}

function encodeShards(m: ShardListResponse): Buffer {
  return Buffer.from(ShardListResponse.encode(m).finish());
}

function sameShards(bytes: Uint8Array, what: string): void {
  let want: ShardListResponse | undefined;
  let wantErr: unknown;
  try {
    want = ShardListResponse.decode(bytes);
  } catch (err) {
    wantErr = err;
  }
  if (wantErr !== undefined) {
    assert.throws(() => decodeShardListResponse(bytes), { message: (wantErr as Error).message }, what);
    return;
  }
  assert.deepStrictEqual(decodeShardListResponse(bytes), want, what);
}

describe('decodeShardListResponse', () => {
  it('decodes random messages exactly as the generated decoder', () => {
    for (let seed = 1; seed <= 1500; seed++) {
      const r = rng(seed * 13);
      const bytes = encodeShards(shardList(r));
      const got = decodeShardListResponse(bytes);
      assert.deepStrictEqual(got, ShardListResponse.decode(bytes), `seed ${seed}`);
      assert.deepStrictEqual(got, ShardListResponse.decode(encodeShards(got)), `seed ${seed} round trip`);
    }
  });

  it('matches the generated decoder on mutated, truncated and extended messages', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed * 65537);
      const m = Buffer.from(encodeShards(shardList(r)));
      const k = int(r, 5);
      let mutated: Buffer;
      if (k === 0 && m.length > 0) {
        for (let i = 0, n = 1 + int(r, 3); i < n; i++) m[int(r, m.length)] = int(r, 256);
        mutated = m;
      } else if (k === 1) {
        mutated = m.subarray(0, int(r, m.length + 1));
      } else if (k === 2) {
        // An unknown field (number 99, varint) at the top level.
        mutated = Buffer.concat([m, Buffer.from([0x98, 0x06, 0x01])]);
      } else if (k === 3) {
        mutated = Buffer.concat([m, Buffer.from(Array.from({ length: 1 + int(r, 6) }, () => int(r, 256)))]);
      } else {
        for (let i = 0; i < m.length; i++) if (m[i] === 0x61 && chance(r, 0.5)) m[i] = 0x80 | int(r, 0x40);
        mutated = m;
      }
      sameShards(mutated, `seed ${seed} mutation ${k}`);
    }
  });

  it("decodes a consumer-shaped listing (a header, a thousand shards, some assigned) without the generated decoder", () => {
    const m = consumerShapedListing();
    const bytes = encodeShards(m);
    const original = ShardListResponse.decode;
    let slow = 0;
    ShardListResponse.decode = (...args) => {
      slow++;
      return original(...args);
    };
    try {
      assert.deepStrictEqual(decodeShardListResponse(bytes), m);
    } finally {
      ShardListResponse.decode = original;
    }
    assert.equal(slow, 0, 'the consumer-shaped listing took the generated decoder');
  });

  it('takes any Uint8Array, not only a Buffer', () => {
    const bytes = encodeShards(shardList(rng(11)));
    const copy = new Uint8Array(bytes.length + 1).subarray(1);
    copy.set(bytes);
    assert.deepStrictEqual(decodeShardListResponse(copy), ShardListResponse.decode(bytes));
  });
});

/** A listing as a consumer sends it: a header, a thousand shards of one app, two thirds assigned. */
function consumerShapedListing(): ShardListResponse {
  const shards: ListResponse_Shard[] = [];
  for (let i = 0; i < 1000; i++) {
    const assigned = i % 3 !== 0;
    shards.push({
      spec: {
        id: `acme/part-${i % 20}/shard-${i}`,
        sources: [{ journal: `acme/input/part-${i % 20}`, min_offset: 0n }],
        recovery_log_prefix: 'acme/recovery',
        hint_prefix: '/gazette/hints/acme',
        hint_backups: 2,
        max_txn_duration: { seconds: 1n, nanos: 0 },
        min_txn_duration: undefined,
        disable: !assigned,
        hot_standbys: i % 10 === 0 ? 1 : 0,
        labels: { labels: [{ name: 'app', value: 'acme', prefix: false }, { name: 'part', value: String(i % 20), prefix: false }] },
        disable_wait_for_ack: false,
        ring_buffer_size: 0,
        read_channel_size: 0,
      },
      mod_revision: BigInt(5000 + i),
      route: assigned ? { members: [{ zone: 'local', suffix: 'consumer-0' }], primary: 0, endpoints: ['http://127.0.0.1:8081'] } : { members: [], primary: -1, endpoints: [] },
      status: assigned ? [{ code: i % 7 === 0 ? 400 : 300, errors: i % 7 === 0 ? ['store failed: disk full'] : [] }] : [],
      create_revision: BigInt(4000 + i),
    });
  }
  const m: ShardListResponse = {
    status: 0,
    header: {
      process_id: { zone: 'local', suffix: 'consumer-0' },
      route: { members: [], primary: -1, endpoints: [] },
      etcd: { cluster_id: 0xf1e2d3c4b5a69788n, member_id: 0x8877665544332211n, revision: 12345n, raft_term: 2n },
    },
    shards,
    extension: Buffer.alloc(0),
  };
  return m;
}

describe('decodeShardSummaries', () => {
  it('gives the table fields of the full decode, with and without labels, on random messages', () => {
    for (let seed = 1; seed <= 1500; seed++) {
      const bytes = encodeShards(shardList(rng(seed * 17)));
      const full = ShardListResponse.decode(bytes);
      for (const labels of [false, true]) {
        const got = decodeShardSummaries(bytes, labels);
        assert.deepStrictEqual(got, summarizeShardList(full, labels), `seed ${seed} labels ${labels}`);
        for (const [i, s] of got.shards.entries()) {
          const spec = full.shards[i]!.spec;
          assert.deepStrictEqual(s.spec && Object.keys(s.spec).sort(), spec && ['disable', 'hot_standbys', 'id', 'labels'], `seed ${seed}: only the table fields`);
          if (spec?.labels && !labels) assert.deepStrictEqual(s.spec!.labels, { labels: [] }, `seed ${seed}: labels not decoded`);
          if (labels) assert.deepStrictEqual(s.spec?.labels, spec?.labels, `seed ${seed}: labels decoded`);
        }
      }
    }
  });

  it('agrees with the full decode wherever the generated decoder accepts a mutated message', () => {
    let compared = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const r = rng(seed * 257);
      const m = Buffer.from(encodeShards(shardList(r)));
      const k = int(r, 3);
      let mutated: Buffer;
      if (k === 0 && m.length > 0) {
        for (let i = 0, n = 1 + int(r, 3); i < n; i++) m[int(r, m.length)] = int(r, 256);
        mutated = m;
      } else if (k === 1) mutated = m.subarray(0, int(r, m.length + 1));
      else mutated = Buffer.concat([m, Buffer.from([0x98, 0x06, 0x01])]);
      let full: ShardListResponse;
      try {
        full = ShardListResponse.decode(mutated);
      } catch {
        // Malformed inside a field a summary steps over: the summary may still decode; only
        // messages the generated decoder takes are compared.
        continue;
      }
      assert.deepStrictEqual(decodeShardSummaries(mutated, seed % 2 === 0), summarizeShardList(full, seed % 2 === 0), `seed ${seed} mutation ${k}`);
      compared++;
    }
    assert.ok(compared > 1000, `only ${compared} mutated messages were decodable`);
  });

  it('decodes a consumer-shaped listing without the generated decoder', () => {
    const m = consumerShapedListing();
    const bytes = encodeShards(m);
    const original = ShardListResponse.decode;
    let slow = 0;
    ShardListResponse.decode = (...args) => {
      slow++;
      return original(...args);
    };
    try {
      assert.deepStrictEqual(decodeShardSummaries(bytes, true), summarizeShardList(m, true));
      const bare = decodeShardSummaries(bytes, false);
      assert.deepStrictEqual(bare, summarizeShardList(m, false));
      assert.equal(bare.shards[5]!.spec!.id, 'acme/part-5/shard-5');
      assert.equal(bare.shards[5]!.status[0]!.code, 300);
    } finally {
      ShardListResponse.decode = original;
    }
    assert.equal(slow, 0, 'the consumer-shaped listing took the generated decoder');
  });
});
