// A small max-flow engine (Dinic's algorithm) over a graph stored in typed arrays.
//
// The allocator's network is large (one edge per item and member of the item's zone: 10,000
// items × 50 members is half a million edges) but almost all of its flow is placed by the caller
// before the engine runs (current assignments, then a greedy fill). The engine therefore starts
// from whatever flow the caller has pushed and only augments it; capacities may be raised between
// runs, never lowered, so the flow already placed stays feasible.
//
// Dinic finds shortest augmenting paths first (breadth-first levels, then blocking flows along
// them). For the allocator that is a useful bias: a direct path source→item→zone→member→sink is
// preferred over one that moves some other item's replica to make room.
//
// Everything here is deterministic: edges are examined in insertion order.

export class FlowGraph {
  readonly nodes: number;
  private to: Int32Array;
  private cap: Int32Array;
  private edges = 0;
  private adjStart: Int32Array | undefined;
  private adj: Int32Array | undefined;

  constructor(nodes: number, edgeHint = 16) {
    this.nodes = nodes;
    this.to = new Int32Array(Math.max(2, edgeHint * 2));
    this.cap = new Int32Array(Math.max(2, edgeHint * 2));
  }

  /** Adds an edge and its residual twin; returns the forward edge's id (the twin is id ^ 1). */
  addEdge(from: number, to: number, capacity: number): number {
    if (this.adj) throw new Error('FlowGraph: edges cannot be added after the first run');
    if (this.edges + 2 > this.to.length) this.grow();
    const e = this.edges;
    // The twin stores the tail, so from(e) = to[e ^ 1].
    this.to[e] = to;
    this.cap[e] = capacity;
    this.to[e + 1] = from;
    this.cap[e + 1] = 0;
    this.edges += 2;
    return e;
  }

  private grow(): void {
    const n = this.to.length * 2;
    const to = new Int32Array(n);
    to.set(this.to);
    const cap = new Int32Array(n);
    cap.set(this.cap);
    this.to = to;
    this.cap = cap;
  }

  get edgeCount(): number {
    return this.edges / 2;
  }

  /** Remaining capacity of edge e. */
  residual(e: number): number {
    return this.cap[e]!;
  }

  /** Flow on forward edge e (what its twin could send back). */
  flow(e: number): number {
    return this.cap[e ^ 1]!;
  }

  head(e: number): number {
    return this.to[e]!;
  }

  /** Pushes `amount` along edge e (the caller keeps node balances right). */
  push(e: number, amount: number): void {
    this.cap[e] -= amount;
    this.cap[e ^ 1] += amount;
  }

  /** Raises edge e's capacity by delta ≥ 0. */
  raise(e: number, delta: number): void {
    if (delta > 0) this.cap[e] += delta;
  }

  private freeze(): void {
    if (this.adj) return;
    const n = this.nodes;
    const start = new Int32Array(n + 1);
    for (let e = 0; e < this.edges; e++) start[this.to[e ^ 1]! + 1]++;
    for (let v = 0; v < n; v++) start[v + 1] += start[v]!;
    const fill = start.slice(0, n);
    const adj = new Int32Array(this.edges);
    for (let e = 0; e < this.edges; e++) adj[fill[this.to[e ^ 1]!]!++] = e;
    this.adjStart = start;
    this.adj = adj;
    // Trim the edge arrays: no more edges can be added.
    this.to = this.to.slice(0, this.edges);
    this.cap = this.cap.slice(0, this.edges);
  }

  /** Augments the current flow to a maximum flow from s to t; returns the amount added. */
  maxFlow(s: number, t: number): number {
    this.freeze();
    const start = this.adjStart!;
    const adj = this.adj!;
    const to = this.to;
    const cap = this.cap;
    const n = this.nodes;
    const level = new Int32Array(n);
    const queue = new Int32Array(n);
    const it = new Int32Array(n);
    const path = new Int32Array(n);
    let total = 0;

    for (;;) {
      // Breadth-first levels over edges with residual capacity.
      level.fill(-1);
      level[s] = 0;
      let qh = 0;
      let qt = 0;
      queue[qt++] = s;
      while (qh < qt) {
        const v = queue[qh++]!;
        for (let k = start[v]!, end = start[v + 1]!; k < end; k++) {
          const e = adj[k]!;
          if (cap[e]! > 0) {
            const w = to[e]!;
            if (level[w]! < 0) {
              level[w] = level[v]! + 1;
              queue[qt++] = w;
            }
          }
        }
      }
      if (level[t]! < 0) return total;

      // Blocking flow: repeated depth-first walks along level-increasing edges.
      it.set(start.subarray(0, n));
      for (;;) {
        let depth = 0;
        let v = s;
        let found = false;
        for (;;) {
          if (v === t) {
            found = true;
            break;
          }
          let advanced = false;
          for (let end = start[v + 1]!; it[v]! < end; it[v]++) {
            const e = adj[it[v]!]!;
            const w = to[e]!;
            if (cap[e]! > 0 && level[w] === level[v]! + 1) {
              path[depth++] = e;
              v = w;
              advanced = true;
              break;
            }
          }
          if (advanced) continue;
          // Dead end: drop v from this level graph and step back.
          level[v] = -1;
          if (depth === 0) break;
          const back = path[--depth]!;
          v = to[back ^ 1]!;
          it[v]++;
        }
        if (!found) break;
        let f = Infinity;
        for (let i = 0; i < depth; i++) f = Math.min(f, cap[path[i]!]!);
        for (let i = 0; i < depth; i++) {
          const e = path[i]!;
          cap[e] -= f;
          cap[e ^ 1] += f;
        }
        total += f;
      }
    }
  }
}
