// A property test of prune planning: for randomized recovery-log histories (several writers
// taking the log over, stale writers whose ops must be skipped, files created, written, linked
// and unlinked, fragments rolled at random append boundaries, hints stored at random points and
// rotated into backups at each take-over), deleting the fragments the planner chooses must leave
// every hint set given to it playable, with exactly the files a playback of the untouched log gives.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import type { FSMHints } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { playLog } from '../../../../src/lib/recoverylog/player.js';
import { collectLiveSegments, planLogFragments } from '../../../../src/lib/recoverylog/prune.js';
import { snapshot, tempDir } from './helpers.js';
import { history } from './prune-history.js';

const CASES = 240;

describe('prune planning (property)', () => {
  it(`keeps every hint set playable with the same files (${CASES} seeded histories)`, async () => {
    let planned = 0;
    let deletedSome = 0;
    let fragmentsDeleted = 0;
    let fragmentsTotal = 0;
    let takeOvers = 0;
    let staleOps = 0;
    let played = 0;
    for (let seed = 1; seed <= CASES; seed++) {
      const c = await history(seed);
      takeOvers += c.takeOvers;
      staleOps += c.staleOps;
      const shard = { id: `shard-${seed}`, log: c.log, primary: c.primary, backups: c.backups };
      const { segmentsByLog, skipped } = collectLiveSegments([shard]);
      const given = [c.primary, ...c.backups].filter((h): h is FSMHints => h !== undefined);
      const pruned = c.src.clone();
      const fragments = c.src.fragments(c.log);
      fragmentsTotal += fragments.length;
      if (skipped.has(c.log)) {
        assert.equal(segmentsByLog.has(c.log), false, `seed ${seed}: a skipped log has no segments`);
      } else {
        planned++;
        const plan = planLogFragments(c.log, segmentsByLog.get(c.log)!, fragments);
        assert.equal(plan.length, fragments.length);
        let n = 0;
        for (const d of plan) {
          if (d.decision !== 'delete') continue;
          assert.ok(d.fragment.mod_time !== 0n, `seed ${seed}: an unpersisted fragment is never deleted`);
          assert.ok(pruned.deleteFragment(c.log, d.fragment.begin, d.fragment.end));
          n++;
        }
        fragmentsDeleted += n;
        if (n > 0) deletedSome++;
      }
      for (const [i, hints] of given.entries()) {
        const full = tempDir('full');
        const part = tempDir('pruned');
        try {
          await playLog(c.src, hints, full);
          const want = snapshot(full);
          assert.deepEqual(want, c.model.expected(), `seed ${seed}, hints ${i}: playback of the whole log gives the writer's files`);
          await playLog(pruned, hints, part).catch((err: Error) => {
            throw new Error(`seed ${seed}, hints ${i}: playback after pruning failed: ${err.message}`);
          });
          assert.deepEqual(snapshot(part), want, `seed ${seed}, hints ${i}: the same files after pruning`);
          played++;
        } finally {
          rmSync(full, { recursive: true, force: true });
          rmSync(part, { recursive: true, force: true });
        }
      }
    }
    // Not vacuous: most histories are planned, and most planned ones lose fragments.
    assert.ok(planned >= CASES / 2, `planned ${planned} of ${CASES}`);
    assert.ok(deletedSome >= planned * 0.6, `deleted something in ${deletedSome} of ${planned} planned histories`);
    assert.ok(takeOvers >= CASES, `take-overs: ${takeOvers}`);
    assert.ok(staleOps >= CASES / 2, `stale ops: ${staleOps}`);
    console.log(
      `# prune property: ${CASES} histories, ${planned} planned, ${deletedSome} with deletions, ${fragmentsDeleted} of ${fragmentsTotal} fragments deleted, ${played} playbacks compared, ${takeOvers} take-overs, ${staleOps} stale ops`,
    );
  });
});
