import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { LogWriter, takeOver } from '../../../../src/lib/recoverylog/record.js';
import { emptyHints, encodeHints, decodeHints } from '../../../../src/lib/recoverylog/hints.js';
import { playLog, playFsm } from '../../../../src/lib/recoverylog/player.js';
import { RecoveryLogError } from '../../../../src/lib/recoverylog/framing.js';
import { bytes, commit, snapshot, tempDir } from './helpers.js';

const LOG = 'recovery/logs/shard-000';

describe('playLog', () => {
  it('plays a new log into files, links and properties', async () => {
    const src = new MemoryLogSource({ chunkSize: 7 });
    const w = new LogWriter({ log: LOG, author: 100 });
    const a = w.create('/000001.sst');
    await commit(src, w, a, w.write(a.fnode, bytes('hello '), 0n), w.write(a.fnode, bytes('world'), 6n));
    const b = w.create('/sub/dir/MANIFEST');
    await commit(src, w, b, w.write(b.fnode, bytes('manifest'), 0n), w.link(a.fnode, '/hard-link'));
    const c = w.create('/tmp-file');
    await commit(src, w, c, w.write(c.fnode, bytes('gone'), 0n), w.unlink(c.fnode, '/tmp-file'), w.property('/IDENTITY', 'db-guid\n'));
    await commit(src, w, w.write(a.fnode, bytes('W'), 0n));

    const dir = tempDir();
    const res = await playLog(src, emptyHints(LOG), dir, { clearDir: true });
    assert.deepEqual(snapshot(dir), {
      '/000001.sst': Buffer.from('Wello world').toString('hex'),
      '/IDENTITY': Buffer.from('db-guid\n').toString('hex'),
      '/hard-link': Buffer.from('Wello world').toString('hex'),
      '/sub/dir/MANIFEST': Buffer.from('manifest').toString('hex'),
    });
    assert.equal(existsSync(join(dir, '.fnodes')), false);
    assert.deepEqual(res.files.map((f) => [f.path, f.fnode, f.size]), [
      ['/000001.sst', 1n, 11n],
      ['/hard-link', 1n, 11n],
      ['/sub/dir/MANIFEST', 4n, 8n],
    ]);
    assert.deepEqual(res.properties, ['/IDENTITY']);
    assert.equal(res.opsApplied, 11);
    assert.equal(res.opsSkipped, 0);
    assert.equal(res.bytes, BigInt('hello world'.length + 'manifest'.length + 'gone'.length + 1));
    assert.equal(res.heads.get(LOG), src.writeHead(LOG));
    // The player's hints equal the writer's but with exact offsets, and play to the same files.
    assert.deepEqual(res.hints.live_nodes.map((n) => n.fnode), w.hints().live_nodes.map((n) => n.fnode));
    const dir2 = tempDir();
    const again = await playLog(src, decodeHints(encodeHints(res.hints)), dir2);
    assert.deepEqual(snapshot(dir2), snapshot(dir));
    assert.deepEqual(again.hints, res.hints);
  });

  it('skips ops of a writer that was taken over, and follows hints across the take-over', async () => {
    const src = new MemoryLogSource({ chunkSize: 5 });
    const append = (log: string, b: Uint8Array) => src.append(log, b).end;
    const a = new LogWriter({ log: LOG, author: 1 });
    const f = a.create('/f');
    await commit(src, a, f, a.write(f.fnode, bytes('from-a'), 0n));
    const hintsA = a.hints();
    const b = await takeOver(src, append, emptyHints(LOG), 2);
    // The stale writer keeps writing: none of it may show.
    const g = a.create('/stale');
    await commit(src, a, g, a.write(f.fnode, bytes('STALE!'), 0n));
    await commit(src, b, b.write(f.fnode, bytes('B'), 0n));
    const h = b.create('/g');
    await commit(src, b, h, b.write(h.fnode, bytes('gg'), 0n));
    const want = { '/f': Buffer.from('Brom-a').toString('hex'), '/g': Buffer.from('gg').toString('hex') };
    for (const hints of [emptyHints(LOG), hintsA, b.hints()]) {
      const dir = tempDir();
      const res = await playLog(src, hints, dir);
      assert.deepEqual(snapshot(dir), want);
      assert.ok(res.opsSkipped >= 2, `stale ops skipped (${JSON.stringify(res.skippedBy)})`);
    }
  });

  it('a take-over whose no-op loses the race retries', async () => {
    const src = new MemoryLogSource();
    const append = (log: string, b: Uint8Array) => src.append(log, b).end;
    const a = new LogWriter({ log: LOG, author: 1 });
    const f = a.create('/f');
    await commit(src, a, f);
    let raced = false;
    const b = await takeOver(src, append, emptyHints(LOG), 2, {
      beforeAppend: async () => {
        if (raced) return;
        raced = true;
        await commit(src, a, a.write(f.fnode, bytes('a wins'), 0n)); // lands before B's no-op
      },
    });
    await commit(src, b, b.write(f.fnode, bytes('B'), 0n));
    const dir = tempDir();
    await playLog(src, emptyHints(LOG), dir);
    assert.equal(readFileSync(join(dir, 'f'), 'utf8'), 'B wins');
  });

  it('plays hinted segments of a parent log before the hinted log', async () => {
    const src = new MemoryLogSource({ chunkSize: 3 });
    const parent = 'recovery/logs/parent';
    const child = 'recovery/logs/child';
    const a = new LogWriter({ log: parent, author: 7 });
    const f = a.create('/f');
    await commit(src, a, f, a.write(f.fnode, bytes('parent data'), 0n));
    const tmp = a.create('/tmp');
    await commit(src, a, tmp, a.unlink(tmp.fnode, '/tmp'));
    // Play the parent exactly, then continue the state in the child log.
    const played = await playFsm(src, emptyHints(parent));
    const b = new LogWriter({ log: child, author: 8, fsm: played.fsm });
    await commit(src, b, b.noop(), b.write(f.fnode, bytes('P'), 0n));
    const g = b.create('/g');
    await commit(src, b, g, b.write(g.fnode, bytes('child'), 0n));
    const hints = b.hints();
    assert.equal(hints.live_nodes[0]!.segments[0]!.log, parent);
    const dir = tempDir();
    const res = await playLog(src, decodeHints(encodeHints(hints), { log: child }), dir);
    assert.deepEqual(snapshot(dir), { '/f': Buffer.from('Parent data').toString('hex'), '/g': Buffer.from('child').toString('hex') });
    assert.deepEqual([...res.heads.keys()].sort(), [child, parent]);
    assert.deepEqual(src.reads.slice(-2).map(([j]) => j), [parent, child]);
  });

  it('refuses hints beyond a log head, reads over missing content, and jumps over hinted segments', async () => {
    const src = new MemoryLogSource();
    const w = new LogWriter({ log: LOG, author: 5 });
    const f = w.create('/f');
    await commit(src, w, f, w.write(f.fnode, bytes('x'.repeat(100)), 0n));
    src.roll(LOG, 1n);
    await commit(src, w, w.write(f.fnode, bytes('y'), 0n));
    const exact = (await playFsm(src, emptyHints(LOG))).hints;

    // A segment beyond the head: possible data loss.
    const beyond = structuredClone(exact);
    beyond.live_nodes[0]!.segments[0]!.last_offset = 10_000n;
    await assert.rejects(playLog(src, beyond, tempDir()), /possible data loss/);

    // The first fragment deleted: a source that errors names the journal and offset.
    const [first] = src.fragments(LOG);
    src.deleteFragment(LOG, first!.begin, first!.end);
    const dir = tempDir();
    await assert.rejects(playLog(src, emptyHints(LOG), dir), (e: Error) => e instanceof RecoveryLogError && e.message.includes(`${LOG}: no content at offset 0`));
    assert.equal(existsSync(dir), false, 'the directory is removed on failure');

    // A source that jumps, as a broker does: a jump over a hinted segment is data loss.
    const jumping = new MemoryLogSource({ onMissing: 'jump' });
    const w2 = new LogWriter({ log: LOG, author: 5 });
    const f2 = w2.create('/f');
    await commit(jumping, w2, f2, w2.write(f2.fnode, bytes('x'.repeat(100)), 0n));
    jumping.roll(LOG, 1n);
    await commit(jumping, w2, w2.write(f2.fnode, bytes('y'), 0n));
    const h2 = (await playFsm(jumping, emptyHints(LOG))).hints;
    const [j1] = jumping.fragments(LOG);
    jumping.deleteFragment(LOG, j1!.begin, j1!.end);
    await assert.rejects(playLog(jumping, h2, tempDir()), /possible data loss/);
    // Without hints, playback reads on after the jump (the file's create is gone: no files).
    const events: string[] = [];
    const res = await playLog(jumping, emptyHints(LOG), tempDir(), { onEvent: (e) => events.push(e.kind) });
    assert.ok(events.includes('jump'));
    assert.equal(res.files.length, 0);
  });

  it('needs an empty directory unless asked to clear it', async () => {
    const src = new MemoryLogSource();
    const dir = tempDir();
    mkdirSync(join(dir, 'x'));
    writeFileSync(join(dir, 'x', 'old'), 'old');
    await assert.rejects(playLog(src, emptyHints(LOG), dir), /not empty/);
    assert.ok(existsSync(join(dir, 'x', 'old')));
    const res = await playLog(src, emptyHints(LOG), dir, { clearDir: true });
    assert.deepEqual(snapshot(dir), {});
    assert.equal(res.opsApplied, 0);
  });

  it('rejects recorded paths leaving the directory', async () => {
    const src = new MemoryLogSource();
    const w = new LogWriter({ log: LOG, author: 5 });
    await commit(src, w, w.create('/../../escape'));
    const dir = tempDir();
    await assert.rejects(playLog(src, emptyHints(LOG), dir), /not a file under the playback directory/);
  });
});
