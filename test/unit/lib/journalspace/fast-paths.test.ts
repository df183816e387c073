// The fast paths of the listing and apply code against their plain counterparts, on seeded
// random trees and listings: the streaming YAML encoder against nodeToYaml + emitGoYaml, a tree
// that takes the listing's specs over against one that copies them, and the one-pass directory
// grouping against the round-by-round grouping it replaced (kept here as the reference).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  decodeJournalTree,
  encodeJournalTree,
  encodeJournalTreeBytes,
  encodeJournalTreeGeneric,
  flattenJournalTree,
  journalTreeFromListing,
  type JournalNode,
} from '../../../../src/lib/journalspace/journalspace.js';
import { CompressionCodec, type JournalSpec, type ListResponse_Journal } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import { cleanPath, plainlyClean } from '../../../../src/lib/protocol/validate/names.js';

function rng(seed: number) {
  let s = seed;
  const next = (n: number) => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s % n;
  };
  return { next, pick: <T>(xs: readonly T[]): T => xs[next(xs.length)]! };
}

const STRINGS = ['', 'a', 'x y', 'true', 'null', '123', '1:20', "it's", '#c', '- d', 'line\nbreak', ' lead', 'trail ', 'é日本', `${'a'.repeat(90)} ${'b'.repeat(10)}`, 'file:///', 's3://b/x/?profile=p', 'app', '"q"', 'tab\there', '---x', 'k: v'];

function randomSpec(r: ReturnType<typeof rng>, name: string): JournalSpec {
  const dur = () => r.pick([undefined, { seconds: 0n, nanos: 0 }, { seconds: 300n, nanos: 0 }, { seconds: 1n, nanos: 500 }, { seconds: -3n, nanos: -5 }]);
  const labels = [];
  for (let i = r.next(4); i > 0; i--) labels.push({ name: r.pick(['app', 'b', 'c-d', r.pick(STRINGS)]), value: r.pick(STRINGS), prefix: r.next(5) === 0 });
  return {
    name,
    replication: r.pick([0, 1, 3]),
    labels: { labels },
    fragment:
      r.next(4) === 0
        ? undefined
        : {
            length: r.pick([0n, 1024n, 67108864n]),
            compression_codec: r.pick([0, 1, 2, 99]) as CompressionCodec,
            stores: r.next(2) ? [] : [r.pick(STRINGS)],
            refresh_interval: dur(),
            retention: dur(),
            flush_interval: dur(),
            path_postfix_template: r.pick(['', '{{.Spool}}', 'x y']),
          },
    flags: r.pick([0, 1, 2, 4, 77]),
    max_append_rate: r.pick([0n, 5n]),
    suspend: r.pick([undefined, { level: 0, offset: 0n }, { level: 1, offset: 7n }]),
  };
}

function randomTree(r: ReturnType<typeof rng>, name: string, depth: number): JournalNode {
  const n: JournalNode = { spec: randomSpec(r, name) };
  if (r.next(3) === 0) n.comment = r.pick(STRINGS);
  if (r.next(3) === 0) n.delete = r.next(2) === 0;
  if (r.next(3) === 0) n.revision = r.pick([0n, 5n, -1n]);
  if (depth > 0 && r.next(2)) {
    n.children = [];
    for (let i = r.next(4); i > 0; i--) {
      n.children.push(r.next(8) === 0 ? { spec: { ...randomSpec(r, ''), name: '', replication: 0, labels: { labels: [] }, fragment: undefined, flags: 0, max_append_rate: 0n, suspend: undefined } } : randomTree(r, r.pick(['a/', 'b', '', r.pick(STRINGS)]), depth - 1));
    }
  }
  return n;
}

function randomListing(r: ReturnType<typeof rng>): ListResponse_Journal[] {
  const names = new Set<string>();
  const n = 1 + r.next(50);
  while (names.size < n) {
    let name = '';
    for (let d = r.next(5); d >= 0; d--) name += r.pick(['a', 'b', 'ab', 'a/', 'b/', '/', 'c-', 'x/y/', '']);
    names.add(name + r.next(30));
  }
  return [...names].sort().map((name) => ({ spec: randomSpec(r, name), mod_revision: BigInt(r.next(3)), route: undefined, create_revision: 1n }));
}

/** The grouping as upstream describes it: one directory per round, the first longest pair first. */
function referenceGrouping(names: string[]): unknown {
  const shared = (a: string, b: string) => {
    let m = 0;
    while (m < Math.min(a.length, b.length) && a[m] === b[m]) m++;
    return m === 0 ? 0 : a.lastIndexOf('/', m - 1) + 1;
  };
  type T = { name: string; children?: T[] };
  let list: T[] = names.map((name) => ({ name }));
  while (list.length > 1) {
    let beg = 0;
    let end = 0;
    let max = -1;
    for (let i = 1; i < list.length; i++) {
      const l = shared(list[i]!.name, list[i - 1]!.name);
      if (l > max) [beg, end, max] = [i - 1, i + 1, l];
      else if (l === max && i === end) end = i + 1;
    }
    list = [...list.slice(0, beg), { name: list[beg]!.name.slice(0, max), children: list.slice(beg, end) }, ...list.slice(end)];
  }
  return list[0];
}

function shape(n: JournalNode): unknown {
  return n.children ? { name: n.spec.name, children: n.children.map(shape) } : { name: n.spec.name };
}

describe('journalspace fast paths', () => {
  it('the streaming encoder writes what the generic emitter writes', () => {
    const r = rng(7);
    for (let k = 0; k < 3000; k++) {
      const tree = randomTree(r, r.pick(['', 'root/', 'x', r.pick(STRINGS)]), 3);
      assert.equal(encodeJournalTree(tree), encodeJournalTreeGeneric(tree));
    }
  });

  it('the encoder writes as bytes the UTF-8 of the text it writes, non-ASCII and escapes included', () => {
    const r = rng(13);
    const odd = ['😀 x', 'naïve', '\u0085', 'a\u2028b', 'lone \ud800 high', '\udc00', '\u00a0nb', '日本/語', '\u007f', 'x'.repeat(5000)];
    for (let k = 0; k < 1000; k++) {
      const tree = randomTree(r, r.pick(['', 'root/', 'x', r.pick(STRINGS)]), 3);
      if (k % 2) tree.comment = r.pick(odd);
      const bytes = encodeJournalTreeBytes(tree);
      assert.deepEqual(bytes, Buffer.from(encodeJournalTree(tree), 'utf8'), `tree ${k}`);
    }
    assert.deepEqual(encodeJournalTreeBytes(journalTreeFromListing([])), Buffer.from(encodeJournalTree(journalTreeFromListing([]))));
  });

  it('listings: adopted specs give the same tree, and the grouping is the round-by-round one', () => {
    const r = rng(11);
    for (let k = 0; k < 500; k++) {
      const listing = randomListing(r);
      const copy = structuredClone(listing);
      const tree = journalTreeFromListing(listing);
      const text = encodeJournalTree(tree);
      assert.equal(text, encodeJournalTreeGeneric(tree));
      assert.equal(encodeJournalTree(journalTreeFromListing(copy, { adoptSpecs: true })), text);
      if (listing.length > 1) assert.deepEqual(shape(tree), referenceGrouping(listing.map((j) => j.spec!.name)));
    }
  });

  it('flattened changes share no objects with each other or with the tree', () => {
    const r = rng(5);
    for (let k = 0; k < 500; k++) {
      const tree = randomTree(r, r.pick(['', 'r/']), 3);
      const seenInTree = new Set<object>();
      const visitTree = (o: unknown) => {
        if (o && typeof o === 'object') {
          seenInTree.add(o);
          for (const v of Object.values(o)) visitTree(v);
        }
      };
      visitTree(tree);
      const seen = new Set<object>();
      const visit = (o: unknown) => {
        if (o && typeof o === 'object') {
          assert.ok(!seen.has(o) && !seenInTree.has(o), 'an object is shared');
          seen.add(o);
          for (const v of Object.values(o)) visit(v);
        }
      };
      visit(flattenJournalTree(tree));
    }
  });

  it('flattening a decoded tree that gives its specs over yields the same changes, sharing nothing', () => {
    const r = rng(11);
    for (let k = 0; k < 300; k++) {
      const yaml = encodeJournalTree(randomTree(r, r.pick(['', 'r/']), 3));
      const copied = flattenJournalTree(decodeJournalTree(yaml));
      const adopted = flattenJournalTree(decodeJournalTree(yaml), { adoptSpecs: true });
      assert.deepEqual(adopted, copied);
      const seen = new Set<object>();
      const visit = (o: unknown) => {
        if (o && typeof o === 'object') {
          assert.ok(!seen.has(o), 'an object is shared');
          seen.add(o);
          for (const v of Object.values(o)) visit(v);
        }
      };
      visit(adopted);
    }
  });
});

describe('plainlyClean', () => {
  it('is true only for clean paths', () => {
    const r = rng(3);
    const parts = ['a', 'b', '.', '..', '/', '//', '...', '.a', 'a.'];
    for (let k = 0; k < 20000; k++) {
      let s = '';
      for (let i = 1 + r.next(6); i > 0; i--) s += r.pick(parts);
      if (plainlyClean(s)) assert.equal(cleanPath(s), s, JSON.stringify(s));
    }
    assert.equal(plainlyClean('a/b'), true);
    assert.equal(plainlyClean('a//b'), false);
    assert.equal(plainlyClean('a/./b'), false);
  });
});
