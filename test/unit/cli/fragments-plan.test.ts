// The listing, comparison and delete machinery of `journals forks` / `journals prune`, on a
// file:// store in a temp dir.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';

import { StoreSet, compareWithChain, deleteObjects, listJournal, warnIgnored, type ListedJournal } from '../../../src/cli/fragments-plan.js';
import { planForks } from '../../../src/lib/fragment/forks.js';
import { JournalSpec } from '../../../src/lib/protocol/gen/broker/protocol.js';
import { FileStore, type FragmentStore } from '../../../src/lib/stores/index.js';

const J = 'acme/events';
const hex16 = (n: number) => n.toString(16).padStart(16, '0');
const H = Buffer.from(Array.from({ length: 400 }, (_, i) => (i * 7 + 3) & 0xff));

function spec(stores: string[]): JournalSpec {
  return JournalSpec.fromPartial({ name: J, replication: 1, fragment: { stores } });
}

describe('fragments-plan', () => {
  let root = '';
  const put = (dir: string, b: number, e: number, opts: { div?: number; gz?: boolean; postfix?: string } = {}): string => {
    const c = Buffer.from(H.subarray(b, e));
    if (opts.div !== undefined) for (let i = opts.div - b; i < c.length; i++) c[i] = c[i]! ^ 0xff;
    const name = `${hex16(b)}-${hex16(e)}-${createHash('sha1').update(c).digest('hex')}.${opts.gz ? 'gz' : 'raw'}`;
    const rel = [J, ...(opts.postfix ? [opts.postfix] : []), name].join('/');
    const f = join(root, dir, rel);
    mkdirSync(dirname(f), { recursive: true });
    writeFileSync(f, opts.gz ? gzipSync(c) : c);
    return rel;
  };

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gazctl-fplan-'));
    mkdirSync(join(root, 'a'));
    mkdirSync(join(root, 'b'));
    put('a', 0, 100, { gz: true });
    put('a', 100, 300);
    put('b', 100, 300, { postfix: 'p=1' });
    put('a', 0, 50); // superseded, same content
    put('b', 120, 220, { div: 170, gz: true }); // divergent from 170
    put('a', 250, 300, { div: 250 }); // differs from its first byte
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('lists every store of the spec, and reads each fork against the chain', async () => {
    const stores = new StoreSet(root);
    const l = await listJournal(spec(['file:///a/', 'file:///b/']), stores);
    assert.deepEqual(l.problems, []);
    assert.equal(l.objects.length, 6);
    const plan = planForks(J, l.objects);
    assert.deepEqual(plan.chain, { begin: 0n, end: 300n });
    const got = await Promise.all(plan.forks.map(async (f) => `${f.object.begin}-${f.object.end} ${JSON.stringify(await compareWithChain(stores, plan, f.object), (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))}`));
    assert.deepEqual(got, ['0-50 {"kind":"same"}', '120-220 {"kind":"differs","at":170}', '250-300 {"kind":"differs","at":250}']);
  });

  it('a comparison that stops early closes every object it opened (GZIP ones too)', async () => {
    // Each stored stream the stores hand out, and whether it was closed.
    const opened: { path: string; closed: boolean }[] = [];
    const stores = new StoreSet(root, (url) => {
      const real = new FileStore(url, { root });
      return Object.assign(Object.create(real) as FragmentStore, {
        open: async (path: string, opts?: Parameters<FragmentStore['open']>[1]) => {
          const stream = await real.open(path, opts);
          const rec = { path, closed: false };
          opened.push(rec);
          stream.once('close', () => (rec.closed = true));
          return stream;
        },
      });
    });
    const l = await listJournal(spec(['file:///a/', 'file:///b/']), stores);
    const plan = planForks(J, l.objects);
    for (const f of plan.forks) await compareWithChain(stores, plan, f.object);
    await new Promise((r) => setTimeout(r, 20));
    assert.ok(opened.some((o) => o.path.endsWith('.gz')), 'a GZIP object was compared');
    assert.deepEqual(
      opened.filter((o) => !o.closed).map((o) => o.path),
      [],
      'every opened object is closed',
    );
  });

  it('a missing object is "unread", not a difference', async () => {
    const stores = new StoreSet(root);
    const l = await listJournal(spec(['file:///a/']), stores);
    const plan = planForks(J, l.objects);
    const fork = { ...plan.forks[0]!.object, path: `${J}/gone.raw` };
    const c = await compareWithChain(stores, plan, fork);
    assert.equal(c.kind, 'unread');
  });

  it('reports stores without a backend and missing store directories, one line each', async () => {
    const l = await listJournal(spec(['gs://bucket/x/', 'file:///missing/', 'file:///b/']), new StoreSet(root));
    assert.equal(l.problems.length, 2, l.problems.join('\n'));
    assert.match(l.problems[0]!, /^journal acme\/events: .*gs:\/\/.*no backend/);
    assert.match(l.problems[1]!, /^journal acme\/events: store file:\/\/\/missing\/: directory .* is not reachable/);
    for (const p of l.problems) assert.ok(!p.includes('\n'));
    const none = await listJournal(spec(['file:///a/']), new StoreSet(undefined));
    assert.match(none.problems[0]!, /no local root directory is configured for file:\/\/ stores \(pass --file-root: /);
  });

  it('ignores objects that are not fragments: listed with their reason, never a problem, never a fork', async () => {
    // A README, notes, an operator's copy in a subdirectory, and near-misses of fragment names.
    const stray = [
      `${J}/README`,
      `${J}/notes.txt`,
      `${J}/backup/copy-of-notes`,
      `${J}/${hex16(0)}-${hex16(100)}-${'a'.repeat(40)}.raw.bak`,
      `${J}/${hex16(0)}-${hex16(100)}-${'a'.repeat(39)}.raw`,
      `${J}/${hex16(100)}-${hex16(0)}-${'a'.repeat(40)}.raw`,
    ];
    for (const p of stray) {
      mkdirSync(dirname(join(root, 'b', p)), { recursive: true });
      writeFileSync(join(root, 'b', p), 'stray\n');
    }
    try {
      const before = await listJournal(spec(['file:///a/', 'file:///b/']), new StoreSet(root));
      assert.deepEqual(before.problems, []);
      assert.equal(before.objects.length, 6, 'the fragments are all listed');
      assert.deepEqual(before.ignored.map((o) => o.path).sort(), [...stray].sort());
      for (const o of before.ignored) {
        assert.equal(o.store, 'file:///b/');
        assert.equal(o.size, 6);
        assert.ok(o.reason.length > 0 && !o.reason.includes('\n'), o.reason);
      }
      assert.ok(!before.objects.some((o) => stray.includes(o.path)));
      const plan = planForks(J, before.objects);
      assert.deepEqual(plan.chain, { begin: 0n, end: 300n });
      assert.ok(!plan.forks.some((f) => stray.includes(f.object.path)));
    } finally {
      for (const p of stray) rmSync(join(root, 'b', p));
      rmSync(join(root, 'b', J, 'backup'), { recursive: true });
    }
  });

  it('warns once per ignored object, also when nested journals both list it', () => {
    const mk = (journal: string, paths: string[]): ListedJournal => ({
      journal,
      spec: spec([]),
      objects: [],
      ignored: paths.map((path) => ({ store: 'file:///b/', path, size: 1, reason: 'why' })),
      nested: 0,
      problems: [],
    });
    const lines: string[] = [];
    warnIgnored([mk('a/b', ['a/b/c/notes.txt', 'a/b/README']), mk('a/b/c', ['a/b/c/notes.txt']), mk('x', [])], (msg, f) =>
      lines.push(`${msg} ${f.journal} ${f.store} ${f.path} ${f.reason}`),
    );
    assert.deepEqual(lines, [
      'ignoring an object that is not a fragment a/b file:///b/ a/b/c/notes.txt why',
      'ignoring an object that is not a fragment a/b file:///b/ a/b/README why',
    ]);
  });

  it('deletes in parallel; a store refusing deletes is one line, the others are deleted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gazctl-fdel-'));
    try {
      mkdirSync(join(dir, 'ok', J), { recursive: true });
      mkdirSync(join(dir, 'no', J), { recursive: true });
      const objs = [];
      for (const s of ['ok', 'no']) {
        for (let i = 0; i < 5; i++) {
          const path = `${J}/${hex16(i)}-${hex16(i + 1)}-${'0'.repeat(40)}.raw`;
          writeFileSync(join(dir, s, path), 'x');
          objs.push({ journal: J, begin: BigInt(i), end: BigInt(i + 1), sum: '0'.repeat(40), store: `file:///${s}/`, path, size: 1, modTime: 1 });
        }
      }
      // Store file:///no/ refuses deletes as a permission problem.
      const stores = new StoreSet(dir, (url) => {
        const real = new FileStore(url, { root: dir });
        if (url !== 'file:///no/') return real;
        return Object.assign(Object.create(real) as FileStore, {
          remove: async () => {
            throw Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
          },
        }) as FragmentStore;
      });
      const res = await deleteObjects(stores, objs);
      assert.equal(res.deleted, 5);
      assert.equal(res.bytes, 5);
      assert.equal(res.failures.length, 1);
      assert.match(res.failures[0]!, /^store file:\/\/\/no\/: no permission to delete; 5 object\(s\) left in place \(first: acme\/events\/.*permission denied\)$/);
      for (const o of objs) assert.equal(existsSync(join(dir, o.store.slice(8), o.path)), o.store === 'file:///no/', o.store + o.path);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
