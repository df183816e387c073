// Code cache for `journals read` (scripts/bundle.mjs runs this after its other cache runs).
//
// V8 compiles a function when it is first called, and a code cache holds only the functions
// compiled by the runs that made it. The other runs never read a journal, so without this one the
// whole read path (Read and ListFragments decoding, the fragment sources, the pooled inflate, the
// output) is compiled at every `journals read`. This script serves a small journal of two
// persisted fragments (one NONE file, one GZIP file, under a file root) from a loopback stub of
// the Journal service, and runs gazctl's direct read of it with GAZCTL_WRITE_CODE_CACHE=1, so
// that load.cjs adds what the read compiled to the caches.
//
// Usage: node scripts/warm-read.mjs <env as JSON>   (prints a warning line and exits 1 on failure)
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { CompressionCodec, FragmentsResponse, ListResponse, ReadResponse, Status } = await import(join(root, 'dist/src/lib/protocol/gen/broker/protocol.js'));
const { startJournalStub, stubHeader } = await import(join(root, 'dist/src/testing/stubs.js'));

const JOURNAL = 'warm/read';
const env = JSON.parse(process.argv[2] ?? '{}');
const fileRoot = mkdtempSync(join(tmpdir(), 'gazctl-warm-'));

// Two fragments of a few pieces' worth of lines each, stored as a store would name them.
const line = (i) => `${String(i).padStart(8, '0')} the quick brown fox jumps over the lazy dog\n`;
const text = (from, n) => Array.from({ length: n }, (_, i) => line(from + i)).join('');
const parts = [
  { body: Buffer.from(text(0, 60_000)), codec: CompressionCodec.NONE, ext: '.raw' },
  { body: Buffer.from(text(60_000, 60_000)), codec: CompressionCodec.GZIP, ext: '.gz' },
];
const content = Buffer.concat(parts.map((p) => p.body));
const head = BigInt(content.length);
const hex = (n) => n.toString(16).padStart(16, '0');
mkdirSync(join(fileRoot, JOURNAL), { recursive: true });
let begin = 0n;
const fragments = parts.map((p) => {
  const end = begin + BigInt(p.body.length);
  const sha = createHash('sha1').update(p.body).digest();
  const name = `${hex(begin)}-${hex(end)}-${sha.toString('hex')}${p.ext}`;
  writeFileSync(join(fileRoot, JOURNAL, name), p.codec === CompressionCodec.GZIP ? gzipSync(p.body) : p.body);
  const sum = { part1: sha.readBigUInt64BE(0), part2: sha.readBigUInt64BE(8), part3: sha.readUInt32BE(16) };
  const spec = { journal: JOURNAL, begin, end, sum, compression_codec: p.codec, backing_store: 'file:///', mod_time: 1_700_000_000n, path_postfix: '' };
  begin = end;
  return { spec, url: `file:///${JOURNAL}/${name}` };
});

const stub = await startJournalStub({
  list: (call) => {
    const journal = {
      spec: { name: JOURNAL, replication: 1, labels: { labels: [{ name: 'name', value: JOURNAL, prefix: false }] }, flags: 0, max_append_rate: 0n },
      mod_revision: 2n,
      route: { members: [{ zone: 'local', suffix: 'warm' }], primary: 0, endpoints: [] },
      create_revision: 2n,
    };
    call.write(ListResponse.fromPartial({ status: Status.OK, header: stubHeader({ revision: 10n }), journals: [journal] }));
    if (call.request.watch) call.write(ListResponse.fromPartial({ header: {}, journals: [] }));
    else call.end();
  },
  read: (call) => {
    const req = call.request;
    const f = fragments.find((x) => x.spec.begin <= req.offset && req.offset < x.spec.end);
    if (!f) call.write(ReadResponse.fromPartial({ status: Status.OFFSET_NOT_YET_AVAILABLE, header: stubHeader(), offset: head, write_head: head }));
    else {
      call.write(ReadResponse.fromPartial({ status: Status.OK, header: stubHeader(), offset: req.offset, write_head: head, fragment: f.spec, fragment_url: f.url }));
      if (!req.do_not_proxy) call.write(ReadResponse.fromPartial({ status: Status.OK, offset: req.offset, content: content.subarray(Number(req.offset), Number(f.spec.end)) }));
    }
    call.end();
  },
  listFragments: (_call, cb) =>
    cb(null, FragmentsResponse.fromPartial({ status: Status.OK, header: stubHeader(), fragments: fragments.map((f) => ({ spec: f.spec, signed_url: f.url })) })),
});

const args = ['journals', 'read', '-l', `name=${JOURNAL}`, '--broker.address', stub.address, '--broker.cache.size', '16', '--file-root', fileRoot];
const child = spawn(process.execPath, [join(root, 'bin', 'run.cjs'), ...args], { cwd: env.HOME, env, stdio: ['ignore', 'pipe', 'pipe'] });
const out = [];
const err = [];
child.stdout.on('data', (b) => out.push(b));
child.stderr.on('data', (b) => err.push(b));
const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
const code = await new Promise((resolve) => child.on('close', (c, s) => resolve(c ?? s)));
clearTimeout(timer);
await stub.stop();
rmSync(fileRoot, { recursive: true, force: true });
const got = Buffer.concat(out);
if (code !== 0 || !got.equals(content)) {
  const why = code !== 0 ? `exit ${code}: ${Buffer.concat(err).toString().trim().split('\n').at(-1)}` : `read ${got.length} bytes, expected ${content.length}`;
  console.log(`bundle: warning: the direct read for the code cache failed (${why}): journals read starts slower`);
  process.exit(1);
}
