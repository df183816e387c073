// Our JSON message handling against Gazette's JSON framing with sum-consumer's record type (Go's
// encoding/json and google/uuid), run by the seq-oracle peer: the UUID taken from a line (its key
// in any case, the four text forms of a UUID, null, missing, malformed), and the bytes of an
// encoded record or acknowledgement, character escapes included.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';

import { decodeJsonMessage, encodeJsonMessage, goJsonField } from '../../src/lib/message/json.js';
import { buildUUID, formatUUID } from '../../src/lib/message/uuid.js';
import { peerBinary } from '../../src/testing/peers.js';

function oracle(mode: string, lines: string[]): string[] {
  const res = spawnSync(peerBinary('seq-oracle'), [mode], { input: lines.join('\n') + '\n', maxBuffer: 1 << 26 });
  assert.equal(res.status, 0, res.stderr.toString());
  return res.stdout.toString().trimEnd().split('\n');
}

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Our decoding of a sum-consumer record: its UUID, key and value (well-formed key and value only). */
function ours(line: string): string {
  try {
    const { doc, uuid } = decodeJsonMessage(line);
    const key = (goJsonField(doc, 'key') ?? '') as string;
    const value = (goJsonField(doc, 'value') ?? 0) as number;
    return `${formatUUID(uuid)} ${Buffer.from(key, 'utf8').toString('hex')} ${value}`;
  } catch {
    return 'ERROR';
  }
}

describe('JSON messages against Gazette v0.103.0 (seq-oracle)', () => {
  it('take the same UUID from a line as Go does', () => {
    const U = '0000006e-0000-1000-8002-010000000001';
    const hand = [
      `{"UUID":"${U}","key":"a","value":1}`,
      `{"UUID":"(${U})","key":"a","value":1}`,
      `{"UUID":"x${U}é","key":"a","value":1}`,
      `{"UUID":"é${U}","key":"a","value":1}`,
      `{"UUID":"\u00e9${U.slice(1)}","key":"a","value":1}`,
      `{"uuid":"${U}","key":"a","value":1}`,
      `{"Uuid":"${U.toUpperCase()}","key":"a","value":1}`,
      `{"UUID":"{${U}}","key":"a","value":1}`,
      `{"UUID":"urn:uuid:${U}","key":"a","value":1}`,
      `{"UUID":"URN:UUID:${U}","key":"a","value":1}`,
      `{"UUID":"${U.replace(/-/g, '')}","key":"a","value":1}`,
      `{"UUID":null,"key":"a","value":1}`,
      `{"key":"a","value":1}`,
      `{"key":"a","value":1,"uuid":"${U}","UUID":"00000000-0000-1000-8000-000000000002"}`,
      `{"UUID":"","key":"a","value":1}`,
      `{"UUID":"${U.slice(1)}","key":"a","value":1}`,
      `{"UUID":"${U.replace('-', 'x')}","key":"a","value":1}`,
      `{"UUID":"${U.slice(0, 35)}g","key":"a","value":1}`,
      `{"UUID":12,"key":"a","value":1}`,
      `{"UUID":["${U}"],"key":"a","value":1}`,
      `{"KEY":"upper","VALUE":2}`,
      `{"\u212aey":"kelvin","value":3}`,
      `{"key":"a<b","value":-4}`,
      `not json`,
      `[1,2]`,
    ];
    const r = prng(7);
    const random: string[] = [];
    const forms = [
      (u: string) => u,
      (u: string) => u.toUpperCase(),
      (u: string) => `{${u}}`,
      (u: string) => `[${u}]`,
      (u: string) => `urn:uuid:${u}`,
      (u: string) => `urn:uUiD:${u}`,
      (u: string) => u.replace(/-/g, ''),
      (u: string) => u.slice(2),
      (u: string) => `${u}0`,
      (u: string) => `${u.slice(0, 10)}é${u.slice(11)}`,
    ];
    const names = ['UUID', 'uuid', 'Uuid', 'uUiD', 'UUIDs', 'id'];
    for (let i = 0; i < 300; i++) {
      const p = Uint8Array.from([1, 2, 3, 4, 5, Math.floor(r() * 256)]);
      const u = formatUUID(buildUUID(p, BigInt(Math.floor(r() * 2 ** 40)), Math.floor(r() * 4)));
      const name = names[Math.floor(r() * names.length)]!;
      const text = forms[Math.floor(r() * forms.length)]!(u);
      random.push(`{"key":"k${i}",${JSON.stringify(name)}:${JSON.stringify(text)},"value":${i - 150}}`);
    }
    const lines = [...hand, ...random];
    const go = oracle('decode', lines);
    assert.equal(go.length, lines.length);
    lines.forEach((l, i) => assert.equal(ours(l), go[i], `line ${i}: ${l}`));
    // The corpus has both outcomes.
    assert.ok(go.filter((g) => g === 'ERROR').length > 20 && go.filter((g) => g !== 'ERROR').length > 150);
  });

  it('encode records and acknowledgements byte for byte as Go does', () => {
    const r = prng(11);
    const alphabet = ['a', 'Z', '0', ' ', '"', '\\', '/', '<', '>', '&', '\n', '\r', '\t', '\b', '\f', '\u0001', '\u001f', '\u007f', 'é', '\u2028', '\u2029', '€', '😀', '\u00a0'];
    const lines: string[] = [];
    const recs: { uuid: Uint8Array; key: string; value: number }[] = [];
    for (let i = 0; i < 300; i++) {
      const uuid = buildUUID(Uint8Array.from([1, 9, 8, 7, 6, i & 0xff]), BigInt(Math.floor(r() * 2 ** 44)), Math.floor(r() * 3));
      let key = '';
      const n = i === 0 ? 0 : Math.floor(r() * 8);
      for (let k = 0; k < n; k++) key += alphabet[Math.floor(r() * alphabet.length)];
      const value = i === 0 ? 0 : Math.floor((r() - 0.5) * 2e9);
      recs.push({ uuid, key, value });
      lines.push(`${formatUUID(uuid)}\t${JSON.stringify(key)}\t${value}`);
    }
    const go = oracle('encode', lines);
    assert.equal(go.length, recs.length);
    recs.forEach((rec, i) => {
      const mine = encodeJsonMessage({ key: rec.key, value: rec.value }, rec.uuid).toString('utf8');
      assert.equal(mine, go[i] + '\n', `record ${i} ${JSON.stringify(rec.key)}`);
    });
    // Record 0 is sum-consumer's acknowledgement: a zero record.
    assert.match(go[0]!, /^\{"UUID":"[0-9a-f-]{36}","key":"","value":0\}$/);
  });
});
