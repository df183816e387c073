// The label-set algebra against a plain reference (group each side by adjacent name, merge the
// groups in UTF-8 byte order of their names), and byteCompare against Buffer.compare of the
// UTF-8 bytes, on random inputs: sorted and unsorted lists, repeated names, non-ASCII names,
// surrogate pairs and lone surrogates.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Label } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { byteCompare, intersectLabels, subtractLabels, unionLabels } from '../../../../src/lib/protocol/labelsets.js';

function rng(seed: number) {
  let s = seed;
  const next = (n: number) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
  return { next, pick: <T>(xs: readonly T[]): T => xs[next(xs.length)]! };
}

const NAMES = ['a', 'app', 'app-x', 'b', 'tier', 'Z', 'é', '\uffef', '😀', '\ud83d', 'ab\ud83d\ude00', 'ab\uff00', 'ab'];
const VALUES = ['', 'x', 'y', 'hot'];

const utf8Compare = (a: string, b: string) => Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));

type Group = { name: string; labels: Label[] };

/** Runs of adjacent labels of one name. */
function groups(ls: readonly Label[]): Group[] {
  const out: Group[] = [];
  for (const l of ls) {
    const last = out.at(-1);
    if (last && last.name === l.name) last.labels.push(l);
    else out.push({ name: l.name, labels: [l] });
  }
  return out;
}

/** The merge join of the two sides' groups, as [left, right] pairs. */
function join(lhs: readonly Label[], rhs: readonly Label[]): [Label[], Label[]][] {
  const L = groups(lhs);
  const R = groups(rhs);
  const out: [Label[], Label[]][] = [];
  let i = 0;
  let j = 0;
  while (i < L.length || j < R.length) {
    const c = i === L.length ? 1 : j === R.length ? -1 : utf8Compare(L[i]!.name, R[j]!.name);
    out.push([c <= 0 ? L[i]!.labels : [], c >= 0 ? R[j]!.labels : []]);
    if (c <= 0) i++;
    if (c >= 0) j++;
  }
  return out;
}

const same = (a: Label[], b: Label[]) => a.length === b.length && a.every((x, k) => x.value === b[k]!.value);
const refUnion = (l: Label[], r: Label[]) => join(l, r).flatMap(([a, b]) => (a.length ? a : b));
const refIntersect = (l: Label[], r: Label[]) => join(l, r).flatMap(([a, b]) => (same(a, b) ? a : []));
const refSubtract = (l: Label[], r: Label[]) => join(l, r).flatMap(([a, b]) => (same(a, b) ? [] : a));

function randomLabels(r: ReturnType<typeof rng>): Label[] {
  const ls: Label[] = [];
  for (let n = r.next(5); n > 0; n--) ls.push({ name: r.pick(NAMES), value: r.pick(VALUES), prefix: r.next(4) === 0 });
  if (r.next(3)) ls.sort((a, b) => utf8Compare(a.name, b.name));
  return ls;
}

describe('label sets', () => {
  it('union, intersection and subtraction agree with the reference merge join', () => {
    const r = rng(5);
    for (let k = 0; k < 20000; k++) {
      const lhs = randomLabels(r);
      const rhs = r.next(4) === 0 ? structuredClone(lhs) : randomLabels(r);
      const what = JSON.stringify({ lhs, rhs });
      assert.deepEqual(unionLabels(lhs, rhs), refUnion(lhs, rhs), what);
      assert.deepEqual(intersectLabels(lhs, rhs), refIntersect(lhs, rhs), what);
      assert.deepEqual(subtractLabels(lhs, rhs), refSubtract(lhs, rhs), what);
    }
  });

  it('results are copies: changing them leaves the inputs alone', () => {
    const lhs: Label[] = [{ name: 'a', value: 'x', prefix: false }];
    const rhs: Label[] = [{ name: 'a', value: 'x', prefix: false }];
    for (const out of [unionLabels(lhs, rhs), intersectLabels(lhs, rhs), subtractLabels(lhs, [])]) out[0]!.value = 'changed';
    assert.equal(lhs[0]!.value, 'x');
    assert.equal(rhs[0]!.value, 'x');
  });

  it('byteCompare orders as the UTF-8 bytes do', () => {
    const r = rng(9);
    const units = ['a', 'b', 'z', '~', 'é', '\u07ff', '\u0800', '\ud7ff', '\ue000', '\uffef', '\ud83d', '\ude00', '😀', '😁'];
    for (let k = 0; k < 50000; k++) {
      const mk = () => Array.from({ length: r.next(5) }, () => r.pick(units)).join('');
      const a = mk();
      const b = r.next(3) === 0 ? a + mk() : mk();
      assert.equal(Math.sign(byteCompare(a, b)), utf8Compare(a, b), JSON.stringify([a, b]));
      assert.equal(Math.sign(byteCompare(b, a)), utf8Compare(b, a), JSON.stringify([b, a]));
    }
  });
});
