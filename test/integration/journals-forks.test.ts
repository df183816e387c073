// Acceptance: `gazctl journals forks` (and `--prune`) against a reference Go broker.
//
// Each row of SHAPES is one journal whose stores hold fragment objects written directly into the
// broker's stores, once with two file:// store directories and once with two prefixes of a
// bucket on the S3 server (objects put with signed requests): real content, named
// `<begin>-<end>-<sha1>.<ext>` with the SHA-1 of that content. A journal's true history H is fixed bytes; a divergent object holds H up
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

import { pollUntil, s3Request, startCluster, startS3, waitForJournalsAssigned, type Cluster, type S3Server } from '../../src/testing/index.js';
import { describeResult, runGazctlOnTerminal } from '../helpers/cli.js';
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

type StoreKey = 'a' | 'b';

/** Where the stores live: the broker's file root, or a bucket of the S3 server. */
interface Backend {
  name: string;
  url: Record<StoreKey, string>;
  /** Writes an object at a store-relative path. */
  write(store: StoreKey, rel: string, data: Buffer): Promise<void>;
  /** Store-relative paths of every object under `<journal>/`, sorted. */
  list(store: StoreKey, journal: string): Promise<string[]>;
  /** Stored size of an object. */
  size(store: StoreKey, rel: string): Promise<number>;
  /** gazctl arguments the stores need (--file-root). */
  args: string[];
}

function fileBackend(root: string): Backend {
  return {
    name: 'file://',
    url: { a: 'file:///a/', b: 'file:///b/' },
    async write(store, rel, data) {
      const f = join(root, store, rel);
      mkdirSync(dirname(f), { recursive: true });
      writeFileSync(f, data);
    },
    async list(store, journal) {
      const base = join(root, store);
      const out: string[] = [];
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
          else out.push(relative(base, p));
        }
      };
      walk(join(base, journal));
      return out.sort();
    },
    async size(store, rel) {
      return statSync(join(root, store, rel)).size;
    },
    args: ['--file-root', root],
  };
}
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

function specs(be: Backend): string {
  return [
    'name: forks/',
    'replication: 1',
    'fragment:',
    '  length: 1024',
    '  compression_codec: NONE',
    `  stores: [${JSON.stringify(be.url.a)}, ${JSON.stringify(be.url.b)}]`,
    '  refresh_interval: 1s',
    'children:',
    ...SHAPES.map(journalOf).sort().map((j) => `- name: ${j}`),
  ].join('\n') + '\n';
}

/** Every object of the journal in both stores, as `<store URL> <store-relative path>`. */
async function listStores(be: Backend, s: Shape): Promise<string[]> {
  const out: string[] = [];
  for (const k of ['a', 'b'] as const) for (const p of await be.list(k, journalOf(s))) out.push(`${be.url[k]} ${p}`);
  return out.sort();
}

async function listAllStores(be: Backend): Promise<string[][]> {
  const out: string[][] = [];
  for (const s of SHAPES) out.push(await listStores(be, s));
  return out;
}

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

/**
 * The whole table on one backend. `start` brings up the cluster (and whatever the stores need)
 * and returns the backend.
 */
function forkShapesSuite(title: string, start: () => Promise<{ cluster: Cluster; backend: Backend; stop?: () => Promise<void> }>): void {
  describe(`journals forks (acceptance, ${title} stores, Go broker)`, { timeout: 240_000 }, () => {
    let cluster: Cluster;
    let be: Backend;
    let stopExtra: (() => Promise<void>) | undefined;
    let cleanup = () => {};
    let dir = '';
    const objKey = (s: Shape, o: Obj) => `${be.url[o.store ?? 'a']} ${pathOf(s, o)}`;

    before(async () => {
      ({ cluster, backend: be, stop: stopExtra } = await start());
      ({ dir, cleanup } = tempDir('gazctl-forks-'));
      for (const s of SHAPES) {
        for (const o of s.objs) {
          const c = contentOf(s, o);
          await be.write(o.store ?? 'a', pathOf(s, o), o.ext === 'gz' ? gzipSync(c) : c);
        }
      }
      await gzOk(cluster, ['journals', 'apply'], { input: specs(be) });
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
      await stopExtra?.();
      cleanup();
    });

    test(`-o json reports exactly the expected forks of each of ${SHAPES.length} shapes`, async () => {
      assert.ok(SHAPES.length >= 15);
      const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '-o', 'json', ...be.args];
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
          assert.equal(f.size, await be.size(o.store ?? 'a', pathOf(s, o)), `${s.name}: size of ${f.path}`);
          assert.ok(f.mod_time > 1_600_000_000, `${s.name}: mod_time`);
        }
      }
    });

    test('the table lists every journal with its chain and fork counts', async () => {
      const r = await gzOk(cluster, ['journals', 'forks', '-l', 'name=forks/straddle', ...be.args]);
      const text = r.stdout.toString('utf8');
      assert.match(text, /^forks\/straddle: chain \[0, 300\), 1 fork\(s\): 1 dead-end, 0 gap, 0 ambiguous$/m);
      assert.match(text, /dead-end.*\b50\b.*\b250\b.*forks\/straddle\/0{14}32-0{13}0fa-.*\b120\b/);
    });

    test('--prune --dry-run prints the plan and deletes nothing', async () => {
      const before = await listAllStores(be);
      const r = await gzOk(cluster, ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', '--dry-run', ...be.args]);
      const dead = SHAPES.filter((s) => !s.ambiguous).reduce((n, s) => n + s.forks.filter((f) => f.kind === 'dead-end').length, 0);
      assert.match(r.stdout.toString('utf8'), new RegExp(`^plan: delete ${dead} dead-end object\\(s\\)`, 'm'));
      assert.match(r.stdout.toString('utf8'), /^dry run: nothing deleted$/m);
      assert.deepEqual(await listAllStores(be), before);
    });

    test('--prune --dry-run -o json: stdout is the document alone, the plan goes to stderr', async () => {
      const before = await listAllStores(be);
      const r = await gzOk(cluster, ['journals', 'forks', '-l', 'name=forks/nested', '-o', 'json', '--prune', '--dry-run', ...be.args]);
      const doc = JSON.parse(r.stdout.toString('utf8')) as JsonDoc;
      assert.deepEqual(doc.journals.map((j) => [j.journal, j.forks.length]), [['forks/nested', 2]]);
      assert.equal(r.stderr, 'plan: delete 2 dead-end object(s), 40 B\n  forks/nested: 2 object(s), 40 B\ndry run: nothing deleted\n');
      assert.deepEqual(await listAllStores(be), before);
    });

    test('--prune without --yes and without a terminal refuses and deletes nothing', async () => {
      const before = await listAllStores(be);
      const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', ...be.args];
      const r = await gz(cluster, args);
      assert.equal(r.code, 2, describeResult(args, r));
      assert.match(oneStderrLine(args, r), /^gazctl: refusing to delete fragments without confirmation.*--yes/);
      assert.deepEqual(await listAllStores(be), before);
    });

    test('--prune on a terminal asks first; answering no deletes nothing', async () => {
      const before = await listAllStores(be);
      const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', ...be.args];
      const r = await runGazctlOnTerminal(args, { env: { BROKER_ADDRESS: cluster.brokerAddress }, prompt: /Delete \d+ dead-end fragment object\(s\) \([^)]*\)\?/, answer: 'n' });
      assert.ok(r.answered, `no prompt was shown:\n${r.screen}`);
      assert.equal(r.code, 0, r.screen);
      assert.match(r.screen, /^plan: delete \d+ dead-end object\(s\)/m);
      assert.deepEqual(await listAllStores(be), before);
    });

    test('a chain past the write head the broker reports is ambiguous: reset-head first, nothing deleted', async () => {
      // The broker lists the stores when it takes the journal and then once an hour: objects
      // written after its first listing lie past the write head it reports.
      const journal = 'heads/behind';
      const h = Buffer.from(Array.from({ length: 200 }, (_, i) => (i * 13 + 1) & 0xff));
      const obj = async (b: number, e: number): Promise<string> => {
        const c = h.subarray(b, e);
        const rel = `${journal}/${hex16(b)}-${hex16(e)}-${createHash('sha1').update(c).digest('hex')}.raw`;
        await be.write('a', rel, c);
        return `${be.url.a} ${rel}`;
      };
      await obj(0, 100);
      await gzOk(cluster, ['journals', 'apply'], {
        input: `name: ${journal}\nreplication: 1\nfragment: {length: 1024, compression_codec: NONE, refresh_interval: 1h, stores: [${JSON.stringify(be.url.a)}]}\n`,
      });
      await waitForJournalsAssigned(cluster, [journal], 30_000);
      await pollUntil('the broker to index [0, 100)', async () => (await listFragmentsAt(cluster.brokerAddress, journal)).some((f) => f.end === 100n), {
        timeoutMs: 30_000,
        intervalMs: 250,
      });
      await obj(100, 200);
      const superseded = await obj(0, 50);
      const r = await gzOk(cluster, ['journals', 'forks', '-l', `name=${journal}`, '-o', 'json', ...be.args]);
      const doc = JSON.parse(r.stdout.toString('utf8')) as JsonDoc;
      const j = doc.journals[0]!;
      assert.deepEqual(j.chain, { begin: 0, end: 200 });
      assert.match(j.ambiguous ?? '', /past the broker's write head 100; run reset-head/);
      assert.deepEqual(j.forks.map((f) => `${f.store} ${f.path} ${f.kind} ${f.deletable}`), [`${superseded} ambiguous false`]);
      const before = await be.list('a', journal);
      const p = await gzOk(cluster, ['journals', 'forks', '-l', `name=${journal}`, '--prune', '--yes', ...be.args]);
      assert.match(p.stdout.toString('utf8'), /^plan: delete 0 dead-end object\(s\)/m);
      assert.match(p.stdout.toString('utf8'), /heads\/behind: nothing deleted, ambiguous: .*reset-head/);
      assert.deepEqual(await be.list('a', journal), before);
    });

    test('--prune --yes deletes exactly the dead-ends; every journal then reads back its chain', async () => {
      const all = await listAllStores(be);
      const before = new Map(SHAPES.map((s, i) => [s.name, all[i]!]));
      const args = ['journals', 'forks', '-l', 'name:prefix=forks/', '--prune', '--yes', ...be.args];
      const r = await gzOk(cluster, args);
      const dead = SHAPES.filter((s) => !s.ambiguous).flatMap((s) => s.forks.filter((f) => f.kind === 'dead-end').map((f) => objKey(s, s.objs[f.i]!)));
      assert.match(r.stdout.toString('utf8'), new RegExp(`^deleted ${dead.length} of ${dead.length} object\\(s\\)`, 'm'));
      for (const s of SHAPES) {
        const want = before.get(s.name)!.filter((k) => !dead.includes(k));
        assert.deepEqual(await listStores(be, s), want, `${s.name}: exactly the dead-ends are gone`);
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
      const again = await gzOk(cluster, ['journals', 'forks', '-l', 'name:prefix=forks/', '-o', 'json', ...be.args]);
      const doc = JSON.parse(again.stdout.toString('utf8')) as JsonDoc;
      assert.deepEqual(doc.journals.flatMap((j) => j.forks.filter((f) => f.kind === 'dead-end')), []);
    });
  });
}

function s3Backend(srv: S3Server): Backend {
  const prefix = { a: 'a/', b: 'b/' } as const;
  const listing = async (store: StoreKey, journal: string): Promise<{ key: string; size: number }[]> => {
    const out: { key: string; size: number }[] = [];
    let token: string | undefined;
    do {
      const query: Record<string, string> = { 'list-type': '2', prefix: `${prefix[store]}${journal}/` };
      if (token !== undefined) query['continuation-token'] = token;
      const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'GET', path: `/${srv.bucket}`, query });
      const xml = await res.text();
      assert.equal(res.status, 200, xml);
      for (const m of xml.matchAll(/<Contents>([\s\S]*?)<\/Contents>/g)) {
        const key = /<Key>([^<]*)<\/Key>/.exec(m[1]!)![1]!;
        const size = Number(/<Size>(\d+)<\/Size>/.exec(m[1]!)![1]);
        out.push({ key: key.replace(/&amp;/g, '&').slice(prefix[store].length), size });
      }
      token = /<IsTruncated>true<\/IsTruncated>/.test(xml) ? /<NextContinuationToken>([^<]*)</.exec(xml)![1] : undefined;
    } while (token !== undefined);
    return out;
  };
  return {
    name: 's3://',
    url: { a: srv.storeUrl(prefix.a), b: srv.storeUrl(prefix.b) },
    async write(store, rel, data) {
      const res = await s3Request({ endpoint: srv.endpoint, credentials: srv.credentials, method: 'PUT', path: `/${srv.bucket}/${prefix[store]}${rel}`, body: data });
      assert.equal(res.status, 200, await res.text());
    },
    async list(store, journal) {
      return (await listing(store, journal)).map((o) => o.key).sort();
    },
    async size(store, rel) {
      const journal = rel.split('/').slice(0, 2).join('/');
      const o = (await listing(store, journal)).find((x) => x.key === rel);
      assert.ok(o, `${rel} is listed`);
      return o.size;
    },
    args: [],
  };
}

forkShapesSuite('file://', async () => {
  const cluster = await startCluster({ brokers: 1 });
  for (const k of ['a', 'b']) mkdirSync(join(cluster.fileRoot, k), { recursive: true });
  return { cluster, backend: fileBackend(cluster.fileRoot) };
});

forkShapesSuite('s3://', async () => {
  const srv = await startS3({ bucket: 'forks' });
  // Brokers and gazctl both take the S3 server's credentials from the environment (the SDKs'
  // default chains), and must never reach for an instance metadata service.
  process.env.AWS_ACCESS_KEY_ID = srv.credentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = srv.credentials.secretAccessKey;
  process.env.AWS_REGION = srv.credentials.region;
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  const cluster = await startCluster({ brokers: 1 });
  return { cluster, backend: s3Backend(srv), stop: () => srv.stop() };
});
