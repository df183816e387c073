// A small seeded PRNG so random tests are repeatable.
export { rng } from '../../../helpers/random.js';

export function int(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/** Reference max flow (augmenting paths by DFS on a capacity matrix), for small graphs. */
export function referenceMaxFlow(n: number, edges: [number, number, number][], s: number, t: number): number {
  const cap = Array.from({ length: n }, () => new Array<number>(n).fill(0));
  const nbrs = Array.from({ length: n }, () => new Set<number>());
  for (const [u, v, c] of edges) {
    cap[u]![v]! += c;
    nbrs[u]!.add(v);
    nbrs[v]!.add(u);
  }
  let total = 0;
  for (;;) {
    const prev = new Array<number>(n).fill(-1);
    prev[s] = s;
    const stack = [s];
    while (stack.length && prev[t] === -1) {
      const u = stack.pop()!;
      for (const v of nbrs[u]!) {
        if (prev[v] === -1 && cap[u]![v]! > 0) {
          prev[v] = u;
          stack.push(v);
        }
      }
    }
    if (prev[t] === -1) return total;
    let f = Infinity;
    for (let v = t; v !== s; v = prev[v]!) f = Math.min(f, cap[prev[v]!]![v]!);
    for (let v = t; v !== s; v = prev[v]!) {
      cap[prev[v]!]![v]! -= f;
      cap[v]![prev[v]!]! += f;
    }
    total += f;
  }
}
