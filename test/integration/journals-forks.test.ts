// Acceptance: `gazctl journals forks` (and `--prune`) against a reference Go broker.
//
// Each row of SHAPES is one journal whose stores hold fragment objects written directly into the
// broker's file:// store directories: real content, named `<begin>-<end>-<sha1>.<ext>` with the
// SHA-1 of that content. A journal's true history H is fixed bytes; a divergent object holds H up
// to its divergence offset and different bytes from there on. For every journal `forks -o json`
// must report exactly the expected forks (object, kind, first differing offset). After
// `--prune --yes`, each store holds exactly the objects it held minus the dead-ends, and a read
// through the broker from the chain's begin returns exactly H over the chain's range.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';

import { pollUntil, startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
import { describeResult } from '../helpers/cli.js';
import { gz, gzOk, listFragmentsAt, oneStderrLine, prng, tempDir } from '../helpers/journals.js';

type Kind = 'dead-end' | 'gap' | 'ambiguous';

interface Obj {
  b: number;
  e: number;
  /** Offset from which the content departs from H (absent: H itself). */
  div?: number;
  store?: 'a' | 'b';
  postfix?: string;
  ext?: 'raw' | 'gz';
}

interface WantFork {
  /** Index into `objs`. */
  i: number;
  kind: Kind;
  diverges: number | 'same content';
}

interface Shape {
  name: string;
  objs: Obj[];
  chain: [number, number];
  forks: WantFork[];
  ambiguous?: boolean;
}

const SHAPES: Shape[] = [
  { name: 'superseded', objs: [{ b: 0, e: 300 }, { b: 0, e: 100 }], chain: [0, 300], forks: [{ i: 1, kind: 'dead-end', diverges: 'same content' }] },
  {
    name: 'divergent-overlap',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 100, e: 180, div: 150 }],
    chain: [0, 200],
    forks: [{ i: 2, kind: 'dead-end', diverges: 150 }],
  },
  {
    name: 'straddle',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 200, e: 300 }, { b: 50, e: 250, div: 120 }],
    chain: [0, 300],
    forks: [{ i: 3, kind: 'dead-end', diverges: 120 }],
  },
  {
    name: 'straddle-same',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 200, e: 300 }, { b: 50, e: 250 }],
    chain: [0, 300],
    forks: [{ i: 3, kind: 'dead-end', diverges: 'same content' }],
  },
  { name: 'fork-from-zero', objs: [{ b: 0, e: 200 }, { b: 200, e: 400 }, { b: 0, e: 250, div: 0 }], chain: [0, 400], forks: [{ i: 2, kind: 'dead-end', diverges: 0 }] },
  {
    name: 'longer-fork',
    // The fork is longer than each chain fragment, so a broker may serve it before the cleanup.
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 200, e: 300 }, { b: 0, e: 250, div: 180 }],
    chain: [0, 300],
    forks: [{ i: 3, kind: 'dead-end', diverges: 180 }],
  },
  {
    name: 'gap-before',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 300, e: 400 }, { b: 400, e: 500 }],
    chain: [300, 500],
    forks: [
      { i: 0, kind: 'gap', diverges: 300 },
      { i: 1, kind: 'gap', diverges: 300 },
    ],
  },
  {
    name: 'separated-runs',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 250, e: 350 }, { b: 350, e: 450 }, { b: 150, e: 300 }],
    chain: [250, 450],
    forks: [
      { i: 0, kind: 'gap', diverges: 250 },
      { i: 1, kind: 'gap', diverges: 250 },
      { i: 4, kind: 'gap', diverges: 'same content' },
    ],
  },
  {
    name: 'second-store',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 100, e: 200, store: 'b' }, { b: 100, e: 150, store: 'b' }],
    chain: [0, 200],
    forks: [{ i: 3, kind: 'dead-end', diverges: 'same content' }],
  },
  {
    name: 'postfixes',
    objs: [{ b: 0, e: 200, postfix: 'date=2024-01-01' }, { b: 0, e: 200 }, { b: 0, e: 100, postfix: 'date=2024-01-02' }, { b: 200, e: 300, postfix: 'date=2024-01-02' }],
    chain: [0, 300],
    forks: [{ i: 2, kind: 'dead-end', diverges: 'same content' }],
  },
  {
    name: 'divergent-copies',
    objs: [{ b: 0, e: 100 }, { b: 0, e: 60, div: 20 }, { b: 0, e: 60, div: 20, store: 'b' }],
    chain: [0, 100],
    forks: [
      { i: 1, kind: 'dead-end', diverges: 20 },
      { i: 2, kind: 'dead-end', diverges: 20 },
    ],
  },
  {
    name: 'gzip-chain',
    objs: [{ b: 0, e: 100, ext: 'gz' }, { b: 100, e: 300, ext: 'gz' }, { b: 100, e: 200, div: 199 }],
    chain: [0, 300],
    forks: [{ i: 2, kind: 'dead-end', diverges: 199 }],
  },
  {
    name: 'equal-end',
    objs: [{ b: 0, e: 300 }, { b: 100, e: 300 }, { b: 0, e: 100, store: 'b' }],
    chain: [0, 300],
    forks: [
      { i: 1, kind: 'dead-end', diverges: 'same content' },
      { i: 2, kind: 'dead-end', diverges: 'same content' },
    ],
  },
  {
    name: 'nested',
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 120, e: 160, div: 140 }, { b: 100, e: 100 }],
    chain: [0, 200],
    forks: [
      { i: 3, kind: 'dead-end', diverges: 'same content' },
      { i: 2, kind: 'dead-end', diverges: 140 },
    ],
  },
  {
    name: 'ambiguous-tie',
    // [100, 200) twice with different content: which is history can't be told from offsets.
    objs: [{ b: 0, e: 100 }, { b: 100, e: 200 }, { b: 100, e: 200, div: 130 }, { b: 0, e: 50 }],
    chain: [0, 200],
    forks: [
      { i: 3, kind: 'ambiguous', diverges: 'same content' },
      { i: -1, kind: 'ambiguous', diverges: 130 }, // whichever of objs[1], objs[2] lost the tie
    ],
    ambiguous: true,
  },
  { name: 'empty', objs: [], chain: [0, 0], forks: [] },
  {
    name: 'gap-and-dead-end',
    objs: [{ b: 0, e: 100 }, { b: 200, e: 300 }, { b: 300, e: 400 }, { b: 300, e: 350, div: 310, store: 'b', postfix: 'x=1' }],
    chain: [200, 400],
    forks: [
      { i: 0, kind: 'gap', diverges: 200 },
      { i: 3, kind: 'dead-end', diverges: 310 },
    ],
  },
];

const STORES = { a: 'file:///a/', b: 'file:///b/' } as const;
const HISTORY = 600;
const journalOf = (s: Shape) => `forks/${s.name}`;
const hex16 = (n: number) => n.toString(16).padStart(16, '0');

function history(s: Shape): Buffer {
  const rand = prng(createHash('sha1').update(s.name).digest().readUInt32BE(0));
  const h = Buffer.alloc(HISTORY);
  for (let i = 0; i < HISTORY; i++) h[i] = Math.floor(rand() * 256);
  return h;
}

function contentOf(s: Shape, o: Obj): Buffer {
  const c = Buffer.from(history(s).subarray(o.b, o.e));
  if (o.div !== undefined) for (let i = o.div - o.b; i < c.length; i++) c[i] = c[i]! ^ 0x5a;
  return c;
}

/** Store-relative path of an object. */
function pathOf(s: Shape, o: Obj): string {
  const sum = createHash('sha1').update(contentOf(s, o)).digest('hex');
  const name = `${hex16(o.b)}-${hex16(o.e)}-${sum}.${o.ext ?? 'raw'}`;
  return [journalOf(s), ...(o.postfix ? [o.postfix] : []), name].join('/');
}

function specs(): string {
  return [
    'name: forks/',
    'replication: 1',
    'fragment:',
    '  length: 1024',
    '  compression_codec: NONE',
    '  stores: [file:///a/, file:///b/]',
    '  refresh_interval: 1s',
    'children:',
    ...SHAPES.map(journalOf).sort().map((j) => `- name: ${j}`),
  ].join('\n') + '\n';
}

/** Every object under `<root>/<dir>/<journal>/`, as `<store URL> <store-relative path>`. */
function listStore(root: string, s: Shape): string[] {
  const out: string[] = [];
  for (const [k, url] of Object.entries(STORES)) {
    const base = join(root, k);
    const walk = (d: string) => {
      let names: string[];
      try {
        names = readdirSync(d);
      } catch {
        return;
      }
      for (const n of names) {
        const p = join(d, n);
        if (statSync(p).isDirectory()) walk(p);
        else out.push(`${url} ${relative(base, p)}`);
      }
    };
    walk(join(base, journalOf(s)));
  }
  return out.sort();
}

const objKey = (s: Shape, o: Obj) => `${STORES[o.store ?? 'a']} ${pathOf(s, o)}`;

interface JsonFork {
  kind: Kind;
  begin: number;
  end: number;
  sum: string;
  store: string;
  path: string;
  size: number;
  mod_time: number;
  diverges_at: number | string;
  deletable: boolean;
}
interface JsonDoc {
  journals: { journal: string; chain: { begin: number; end: number }; ambiguous?: string; forks: JsonFork[] }[];
}

describe('journals forks (acceptance, file:// stores, Go broker)', { timeout: 240_000 }, () => {
  let cluster: Cluster;
  let cleanup = () => {};
  let dir = '';

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    ({ dir, cleanup } = tempDir('gazctl-forks-'));
    for (const k of Object.keys(STORES)) mkdirSync(join(cluster.fileRoot, k), { recursive: true });
    for (const s of SHAPES) {
      for (const o of s.objs) {
        const file = join(cluster.fileRoot, o.store ?? 'a', pathOf(s, o));
        mkdirSync(dirname(file), { recursive: true });
        const c = contentOf(s, o);
        writeFileSync(file, o.ext === 'gz' ? gzipSync(c) : c);
      }
    }
    await gzOk(cluster, ['journals', 'apply'], { input: specs() });
    await waitForJournalsAssigned(cluster, SHAPES.map(journalOf), 30_000);
    // The broker indexes the stores on its own schedule: wait until each journal's index
    // reaches its chain's end (its write head is the index's end).
    await pollUntil(
      'the broker to index the synthesized fragments',
      async () => {
        for (const s of SHAPES) {
          const fs = await listFragmentsAt(cluster.brokerAddress, journalOf(s));
          const end = fs.reduce((m, f) => (f.end > m ? f.end : m), 0n);
          if (end !== BigInt(s.chain[1])) return false;
        }
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  });
  after(async () => {
    await cluster?.stop();
    cleanup();
  });

  test(`-o json reports exactly the expected forks of each of ${SHAPES.length} shapes`, async () => {
    assert.ok(SHAPES.length >= 15);
    const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '-o', 'json', '--file-root', cluster.fileRoot];
    const r = await gzOk(cluster, args);
    assert.equal(r.stderr, '', 'nothing on stderr');
    const doc = JSON.parse(r.stdout.toString('utf8')) as JsonDoc;
    assert.deepEqual(doc.journals.map((j) => j.journal), SHAPES.map(journalOf).sort(), 'one entry per journal, in name order');
    for (const s of SHAPES) {
      const j = doc.journals.find((x) => x.journal === journalOf(s))!;
      assert.deepEqual([j.chain.begin, j.chain.end], s.chain, `${s.name}: chain range`);
      assert.equal(j.ambiguous !== undefined, s.ambiguous === true, `${s.name}: ambiguous? ${j.ambiguous}`);
      const got = j.forks.map((f) => `${f.store} ${f.path} ${f.kind} ${f.diverges_at} ${f.deletable}`).sort();
      const want = s.forks
        .map((w) => {
          let key: string;
          if (w.i >= 0) key = objKey(s, s.objs[w.i]!);
          else {
            // The tie's loser is the object with the greater sum (the chain takes the smaller).
            const bySum = [s.objs[1]!, s.objs[2]!].map((o) => objKey(s, o)).sort((p, q) => (p.split('-').at(-1)! < q.split('-').at(-1)! ? -1 : 1));
            key = bySum[1]!;
          }
          return `${key} ${w.kind} ${w.diverges} ${w.kind === 'dead-end'}`;
        })
        .sort();
      assert.deepEqual(got, want, `${s.name}: forks\n${JSON.stringify(j, null, 1)}`);
      for (const f of j.forks) {
        const o = s.objs.find((x) => objKey(s, x) === `${f.store} ${f.path}`)!;
        assert.equal(f.begin, o.b);
        assert.equal(f.end, o.e);
        assert.equal(f.size, statSync(join(cluster.fileRoot, o.store ?? 'a', pathOf(s, o))).size, `${s.name}: size of ${f.path}`);
        assert.ok(f.mod_time > 1_600_000_000, `${s.name}: mod_time`);
      }
    }
  });

  test('the table lists every journal with its chain and fork counts', async () => {
    const r = await gzOk(cluster, ['journals', 'forks', '-l', 'name=forks/straddle', '--file-root', cluster.fileRoot]);
    const text = r.stdout.toString('utf8');
    assert.match(text, /^forks\/straddle: chain \[0, 300\), 1 fork\(s\): 1 dead-end, 0 gap, 0 ambiguous$/m);
    assert.match(text, /dead-end.*\b50\b.*\b250\b.*forks\/straddle\/0{14}32-0{13}0fa-.*\b120\b/);
  });

  test('--prune --dry-run prints the plan and deletes nothing', async () => {
    const before = SHAPES.map((s) => listStore(cluster.fileRoot, s));
    const r = await gzOk(cluster, ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', '--dry-run', '--file-root', cluster.fileRoot]);
    const dead = SHAPES.filter((s) => !s.ambiguous).reduce((n, s) => n + s.forks.filter((f) => f.kind === 'dead-end').length, 0);
    assert.match(r.stdout.toString('utf8'), new RegExp(`^plan: delete ${dead} dead-end object\\(s\\)`, 'm'));
    assert.match(r.stdout.toString('utf8'), /^dry run: nothing deleted$/m);
    assert.deepEqual(SHAPES.map((s) => listStore(cluster.fileRoot, s)), before);
  });

  test('--prune without --yes and without a terminal refuses and deletes nothing', async () => {
    const before = SHAPES.map((s) => listStore(cluster.fileRoot, s));
    const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', '--file-root', cluster.fileRoot];
    const r = await gz(cluster, args);
    assert.equal(r.code, 2, describeResult(args, r));
    assert.match(oneStderrLine(args, r), /^gazctl: refusing to delete fragments without confirmation.*--yes/);
    assert.deepEqual(SHAPES.map((s) => listStore(cluster.fileRoot, s)), before);
  });

  test('--prune --yes deletes exactly the dead-ends; every journal then reads back its chain', async () => {
    const before = new Map(SHAPES.map((s) => [s.name, listStore(cluster.fileRoot, s)]));
    const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', '--yes', '--file-root', cluster.fileRoot];
    const r = await gzOk(cluster, args);
    const dead = SHAPES.filter((s) => !s.ambiguous).flatMap((s) => s.forks.filter((f) => f.kind === 'dead-end').map((f) => objKey(s, s.objs[f.i]!)));
    assert.match(r.stdout.toString('utf8'), new RegExp(`^deleted ${dead.length} of ${dead.length} object\\(s\\)`, 'm'));
    for (const s of SHAPES) {
      const want = before.get(s.name)!.filter((k) => !dead.includes(k));
      assert.deepEqual(listStore(cluster.fileRoot, s), want, `${s.name}: exactly the dead-ends are gone`);
    }

    // Wait until the broker's index no longer holds a deleted object, then read each journal
    // through the broker from its chain's begin.
    await pollUntil(
      'the broker to drop the deleted fragments from its index',
      async () => {
        for (const s of SHAPES) {
          const fs = await listFragmentsAt(cluster.brokerAddress, journalOf(s));
          for (const f of fs) {
            const o = s.objs.find((x) => BigInt(x.b) === f.begin && BigInt(x.e) === f.end && x.postfix === (f.path_postfix || undefined));
            if (o === undefined || dead.includes(objKey(s, o))) return false;
          }
        }
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const offsets = join(dir, 'offsets.json');
    for (const s of SHAPES) {
      if (s.ambiguous || s.chain[1] === 0) continue; // an ambiguous journal has no one history to read
      writeFileSync(offsets, JSON.stringify({ [journalOf(s)]: s.chain[0] }));
      const r2 = await gzOk(cluster, ['journals', 'read', '-l', `name=${journalOf(s)}`, '--offsets', offsets]);
      assert.ok(r2.stdout.equals(history(s).subarray(s.chain[0], s.chain[1])), `${s.name}: read back [${s.chain[0]}, ${s.chain[1]}) (${r2.stdout.length} bytes)`);
    }

    // A second run finds no dead-ends left.
    const again = await gzOk(cluster, ['journals', 'forks', '-l', 'name:prefix=forks/', '-o', 'json', '--file-root', cluster.fileRoot]);
    const doc = JSON.parse(again.stdout.toString('utf8')) as JsonDoc;
    assert.deepEqual(doc.journals.flatMap((j) => j.forks.filter((f) => f.kind === 'dead-end')), []);
  });
});
