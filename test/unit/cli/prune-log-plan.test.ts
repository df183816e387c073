// buildPrunePlan over a scripted listing: per-fragment decisions with their reasons, byte totals
// (summed as numbers while exact, as bigints past 2^53), the refusal over unpersisted fragments,
// and agreement with the library's planLogFragments.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { buildPrunePlan } from '../../../src/cli/prune-log-plan.js';
import { Logger } from '../../../src/cli/log.js';
import type { ShardHints } from '../../../src/cli/shard-logs.js';
import { GetHintsResponse } from '../../../src/lib/protocol/gen/consumer/protocol.js';
import type { Fragment, FragmentsResponse__Fragment } from '../../../src/lib/protocol/gen/broker/protocol.js';
import type { FSMHints } from '../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { planLogFragments } from '../../../src/lib/recoverylog/prune.js';

const LOG = 'recovery/shard-a';

/** Hints whose one live file spans [first, last) of LOG. */
function hints(first: bigint, last: bigint): FSMHints {
  return {
    log: LOG,
    live_nodes: [{ fnode: 10n, segments: [{ author: 0x5eed, first_seq_no: 10n, first_offset: first, first_checksum: 0, last_seq_no: 20n, last_offset: last, log: '' }] }],
    properties: [],
  };
}

function frag(begin: bigint, end: bigint, modTime = 1_700_000_000n): FragmentsResponse__Fragment {
  const spec: Fragment = { journal: LOG, begin, end, sum: { part1: begin, part2: 1n, part3: 2 }, compression_codec: 1, backing_store: 'file:///', mod_time: modTime, path_postfix: '' };
  return { spec, signed_url: '' };
}

async function plan(h: FSMHints, listed: FragmentsResponse__Fragment[]) {
  const shard: ShardHints = { id: 'shard-a', log: LOG, response: GetHintsResponse.fromPartial({}), primary: h, backups: [] };
  const lines: string[] = [];
  const p = await buildPrunePlan([shard], {
    gates: { check: async () => ({ ok: true }) as never },
    listFragments: async () => listed,
    log: new Logger('warn', 'text', (l) => lines.push(l)),
  });
  assert.equal(p.logs.length, 1);
  return p.logs[0]!;
}

describe('buildPrunePlan', () => {
  it('deletes what no live segment needs, keeps the rest, with the library reasons and byte totals', async () => {
    const listed = [frag(0n, 100n), frag(100n, 250n), frag(250n, 400n), frag(400n, 1000n), { spec: undefined, signed_url: '' }, frag(1000n, 1300n)];
    const l = await plan(hints(300n, 1100n), listed);
    assert.equal(l.status, 'planned');
    assert.deepEqual(l.delete.map((p) => [p.fragment.begin, p.fragment.end]), [[0n, 100n], [100n, 250n]]);
    assert.deepEqual(l.keep.map((p) => [p.fragment.begin, p.fragment.end]), [[250n, 400n], [400n, 1000n], [1000n, 1300n]]);
    assert.equal(l.deleteBytes, 250n);
    assert.equal(l.keepBytes, 1050n);
    const specs = listed.flatMap((f) => (f.spec ? [f.spec] : []));
    const want = planLogFragments(LOG, l.liveSegments, specs);
    assert.deepEqual([...l.delete, ...l.keep].map((p) => p.reason).sort(), want.map((d) => d.reason).sort());
  });

  it('sums sizes exactly past 2^53', async () => {
    const big = 1n << 60n;
    const listed = [frag(big, big + 3n), frag(big + 3n, big + 10n), frag((1n << 53n) - 1n, (1n << 53n) + 3n), frag(big + 100n, big + 200n)];
    const l = await plan(hints(big + 100n, big + 150n), listed);
    assert.equal(l.deleteBytes, 3n + 7n + 4n);
    assert.equal(l.keepBytes, 100n);
    // An end just past 2^53 (not a double) after a begin below it.
    const edge = await plan(hints(1n << 54n, (1n << 54n) + 10n), [frag((1n << 53n) - 1n, (1n << 53n) + 3n), frag(0n, 10n)]);
    assert.equal(edge.deleteBytes, 14n);
  });

  it('refuses a log with unpersisted fragments that no segment needs, counting them', async () => {
    const listed = [frag(0n, 100n, 0n), frag(100n, 200n), frag(200n, 300n, 0n), frag(300n, 400n)];
    const l = await plan(hints(300n, 400n), listed);
    assert.equal(l.status, 'refused');
    assert.match(l.problem!, /^2 unpersisted fragment\(s\) overlap no live segment \(first: \[0, 100\)\)/);
  });
});
