// Unit tests of the max-flow engine (src/core/allocator/maxflow.ts) against a reference solver.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FlowGraph } from '../../../../src/core/allocator/maxflow.js';
import { int, referenceMaxFlow, rng } from './rand.js';

function check(g: FlowGraph, ids: number[], edges: [number, number, number][], n: number, s: number, t: number) {
  const balance = new Array<number>(n).fill(0);
  ids.forEach((e, k) => {
    const f = g.flow(e);
    assert.ok(f >= 0 && g.residual(e) >= 0, 'flow within capacity');
    assert.equal(g.residual(e) + f, edges[k]![2], 'capacity is residual + flow');
    balance[edges[k]![0]] -= f;
    balance[edges[k]![1]] += f;
  });
  for (let v = 0; v < n; v++) if (v !== s && v !== t) assert.equal(balance[v], 0, `conservation at ${v}`);
  return balance[t]!;
}

describe('FlowGraph', () => {
  it('finds the maximum flow of a textbook network', () => {
    const edges: [number, number, number][] = [
      [0, 2, 10], [0, 3, 10], [2, 3, 2], [2, 4, 4], [2, 5, 8], [3, 5, 9], [5, 4, 6], [4, 1, 10], [5, 1, 10],
    ];
    const g = new FlowGraph(6);
    const ids = edges.map(([u, v, c]) => g.addEdge(u, v, c));
    assert.equal(g.maxFlow(0, 1), 19);
    assert.equal(check(g, ids, edges, 6, 0, 1), 19);
    assert.equal(g.maxFlow(0, 1), 0); // already maximal
  });

  it('agrees with a reference solver on random graphs, from a pre-pushed flow and after raising capacities', () => {
    const r = rng(7);
    for (let round = 0; round < 200; round++) {
      const n = int(r, 3, 12);
      const edges: [number, number, number][] = [];
      const m = int(r, 1, 40);
      for (let k = 0; k < m; k++) {
        const u = int(r, 0, n - 1);
        const v = int(r, 0, n - 1);
        if (u !== v) edges.push([u, v, int(r, 0, 5)]);
      }
      const g = new FlowGraph(n, 1);
      const ids = edges.map(([u, v, c]) => g.addEdge(u, v, c));
      // Pre-push one unit along a direct source→sink edge, if any: the engine must start from it.
      const direct = edges.findIndex(([u, v, c]) => u === 0 && v === 1 && c > 0);
      if (direct >= 0) g.push(ids[direct]!, 1);
      const got = g.maxFlow(0, 1) + (direct >= 0 ? 1 : 0);
      assert.equal(got, referenceMaxFlow(n, edges, 0, 1), `round ${round}`);
      assert.equal(check(g, ids, edges, n, 0, 1), got);

      // Raise some capacities and continue.
      const raised = edges.map(([u, v, c]) => [u, v, c] as [number, number, number]);
      ids.forEach((e, k) => {
        if (r() < 0.3) {
          const d = int(r, 1, 3);
          g.raise(e, d);
          raised[k]![2] += d;
        }
      });
      const more = g.maxFlow(0, 1);
      assert.equal(got + more, referenceMaxFlow(n, raised, 0, 1), `round ${round} after raise`);
      assert.equal(check(g, ids, raised, n, 0, 1), got + more);
    }
  });

  it('refuses new edges once it has run', () => {
    const g = new FlowGraph(2);
    g.addEdge(0, 1, 1);
    g.maxFlow(0, 1);
    assert.throws(() => g.addEdge(0, 1, 1), /cannot be added/);
  });
});
