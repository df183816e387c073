import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { encodeApplyRequest, encodeApplyRequestFast } from '../../../../src/lib/protocol/fast-encode.js';
import { ApplyRequest, type ApplyRequest_Change, type JournalSpec } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { rng, type Rand, below, chance } from '../../../helpers/random.js';

const int = below;

// Plain ASCII, non-ASCII text, control characters and emoji, and lone surrogates (which UTF-8
// encoders replace with U+FFFD).
const ALPHABETS = ['abcdefghijklmnopqrstuvwxyz/-_.=0123456789', 'Zürich-東京-ß-é', '\uFEFF\u0000\u007f\u0080😀', 'a\ud800b\udc00c'];

function str(r: Rand, max = 40): string {
  if (chance(r, 0.15)) return '';
  const alpha = ALPHABETS[chance(r, 0.75) ? 0 : int(r, ALPHABETS.length)]!;
  const chars = Array.from(alpha);
  let s = '';
  // Now and then a string long enough for a two-byte length prefix.
  const n = chance(r, 0.05) ? 100 + int(r, 300) : 1 + int(r, max);
  for (let i = 0; i < n; i++) s += chars[int(r, chars.length)];
  return s;
}

/** A bigint spread over small, 2^53-ish and full 64-bit magnitudes, signed or not. */
function big(r: Rand): bigint {
  const k = int(r, 7);
  if (k === 0) return 0n;
  if (k === 1) return BigInt(int(r, 1000));
  if (k === 2) return -1n;
  if (k === 3) return BigInt(int(r, 2 ** 30)) * BigInt(1 + int(r, 2 ** 22));
  if (k === 4) return 2n ** 53n - 2n + BigInt(int(r, 4));
  const v = (BigInt(int(r, 2 ** 32)) << 32n) | BigInt(int(r, 2 ** 32));
  return BigInt.asIntN(64, v);
}

function i32(r: Rand): number {
  const k = int(r, 6);
  if (k === 0) return 0;
  if (k === 1) return -1;
  if (k === 2) return int(r, 200);
  if (k === 3) return int(r, 2 ** 31) | 0;
  if (k === 4) return 2 ** 31 - 1;
  return -int(r, 2 ** 31 + 1);
}

function u32(r: Rand): number {
  const k = int(r, 4);
  return k === 0 ? 0 : k === 1 ? int(r, 8) : k === 2 ? 2 ** 32 - 1 : int(r, 2 ** 32);
}

const maybe = <T>(r: Rand, f: () => T): T | undefined => (chance(r, 0.7) ? f() : undefined);

const duration = (r: Rand) => ({ seconds: big(r), nanos: i32(r) });

function spec(r: Rand): JournalSpec {
  return {
    name: str(r, 60),
    replication: i32(r),
    labels: maybe(r, () => ({
      labels: Array.from({ length: int(r, 5) }, () => ({ name: str(r), value: str(r), prefix: chance(r, 0.3) })),
    })),
    fragment: maybe(r, () => ({
      length: big(r),
      compression_codec: i32(r),
      stores: Array.from({ length: int(r, 3) }, () => str(r)),
      refresh_interval: maybe(r, () => duration(r)),
      retention: maybe(r, () => duration(r)),
      flush_interval: maybe(r, () => duration(r)),
      path_postfix_template: str(r),
    })),
    flags: u32(r),
    max_append_rate: big(r),
    suspend: maybe(r, () => ({ level: i32(r), offset: big(r) })),
  };
}

function change(r: Rand): ApplyRequest_Change {
  const k = int(r, 4);
  if (k === 0) return { expect_mod_revision: big(r), upsert: undefined, delete: str(r) };
  // Mostly upserts; now and then a change with both (or neither) set, which encodes all the same.
  return { expect_mod_revision: big(r), upsert: k === 3 && chance(r, 0.2) ? undefined : spec(r), delete: k === 3 ? str(r) : '' };
}

function request(r: Rand): ApplyRequest {
  const n = chance(r, 0.1) ? 0 : chance(r, 0.1) ? 100 + int(r, 100) : 1 + int(r, 10);
  return { changes: Array.from({ length: n }, () => change(r)) };
}

const generated = (req: ApplyRequest) => Buffer.from(ApplyRequest.encode(req).finish());

/** A spec shaped like those `journals apply` sends for a hierarchy of journals. */
function hierarchySpec(i: number): JournalSpec {
  return {
    name: `acme/part-${String(i % 20).padStart(2, '0')}/journal-${String(i).padStart(6, '0')}`,
    replication: 3,
    labels: { labels: [{ name: 'app', value: 'billing', prefix: false }, { name: 'content-type', value: 'application/x-ndjson', prefix: false }] },
    fragment: {
      length: 67108864n,
      compression_codec: 1,
      stores: ['s3://bucket/prefix/', 'file:///'],
      refresh_interval: { seconds: 300n, nanos: 0 },
      retention: undefined,
      flush_interval: { seconds: 0n, nanos: 0 },
      path_postfix_template: '',
    },
    flags: 0,
    max_append_rate: 0n,
    suspend: undefined,
  };
}

describe('encodeApplyRequest', () => {
  it('encodes random requests to the generated encoder bytes, on the fast path', () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const req = request(rng(seed));
      const fast = encodeApplyRequestFast(req);
      assert.ok(fast !== undefined, `seed ${seed}: the fast path refused a valid request`);
      assert.deepStrictEqual(fast, generated(req), `seed ${seed}`);
      assert.deepStrictEqual(encodeApplyRequest(req), fast, `seed ${seed}`);
    }
  });

  it('encodes the batches of a large hierarchy (creates, updates at a revision, upserts and deletes) exactly', () => {
    const changes: ApplyRequest_Change[] = [];
    for (let i = 0; i < 1000; i++) {
      const k = i % 4;
      if (k === 3) changes.push({ expect_mod_revision: BigInt(i), upsert: undefined, delete: hierarchySpec(i).name });
      else changes.push({ expect_mod_revision: k === 0 ? 0n : k === 1 ? BigInt(1000 + i) : -1n, upsert: hierarchySpec(i), delete: '' });
    }
    for (let i = 0; i < changes.length; i += 100) {
      const req = { changes: changes.slice(i, i + 100) };
      assert.deepStrictEqual(encodeApplyRequestFast(req), generated(req), `batch at ${i}`);
    }
  });

  it('writes set but empty sub-messages, and decodes back to the request', () => {
    const req: ApplyRequest = {
      changes: [
        {
          expect_mod_revision: 0n,
          upsert: {
            name: 'a/b',
            replication: 0,
            labels: { labels: [] },
            fragment: { length: 0n, compression_codec: 0, stores: [], refresh_interval: { seconds: 0n, nanos: 0 }, retention: undefined, flush_interval: undefined, path_postfix_template: '' },
            flags: 0,
            max_append_rate: 0n,
            suspend: { level: 0, offset: 0n },
          },
          delete: '',
        },
      ],
    };
    const fast = encodeApplyRequestFast(req)!;
    assert.deepStrictEqual(fast, generated(req));
    assert.deepStrictEqual(ApplyRequest.decode(fast), req);
  });

  it('leaves requests it does not expect to the generated encoder, which encodes or refuses them as before', () => {
    const base = () => ({ expect_mod_revision: 0n, upsert: hierarchySpec(1), delete: '' });
    const odd: [string, ApplyRequest_Change][] = [
      ['int64 above 64 bits', { ...base(), expect_mod_revision: 2n ** 64n }],
      ['int64 below 64 bits', { ...base(), expect_mod_revision: -(2n ** 63n) - 1n }],
      ['fractional replication', { ...base(), upsert: { ...hierarchySpec(1), replication: 1.5 } }],
      ['int32 out of range', { ...base(), upsert: { ...hierarchySpec(1), replication: 2 ** 31 } }],
      ['negative flags', { ...base(), upsert: { ...hierarchySpec(1), flags: -1 } }],
      ['numeric revision', { ...base(), expect_mod_revision: 5 as unknown as bigint }],
      ['numeric name', { ...base(), upsert: { ...hierarchySpec(1), name: 7 as unknown as string } }],
      ['undefined label prefix', { ...base(), upsert: { ...hierarchySpec(1), labels: { labels: [{ name: 'a', value: 'b', prefix: undefined as unknown as boolean }] } } }],
      ['string max_append_rate', { ...base(), upsert: { ...hierarchySpec(1), max_append_rate: '5' as unknown as bigint } }],
    ];
    for (const [what, c] of odd) {
      const req = { changes: [c] };
      assert.equal(encodeApplyRequestFast(req), undefined, what);
      let want: Buffer | undefined;
      let wantErr: unknown;
      try {
        want = generated(req);
      } catch (err) {
        wantErr = err;
      }
      if (wantErr !== undefined) assert.throws(() => encodeApplyRequest(req), { message: (wantErr as Error).message }, what);
      else assert.deepStrictEqual(encodeApplyRequest(req), want, what);
    }
  });
});
