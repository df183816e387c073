// The one place we reach into the `etcd3` package's private state.
//
// A watch should fail over when its etcd member loses the raft leader. etcd does that only for
// watch streams whose request metadata carries `hasleader: true` (Go clients send it with
// clientv3.WithRequireLeader); without it a watch on a member cut off from the leader sits
// silent. etcd3 has no option to add metadata to its Watch stream, but its connection pool (the
// private `pool` of an Etcd3) hands out the per-host gRPC client and the metadata it would send,
// so the stream is opened from there with the metadata added.
//
// This is a correctness need, not a speed-up: the public stream works, minus the fail-over.
// When an etcd3 upgrade moves the pool, watches quietly take the public stream; then
// test/unit/lib/keyspace/etcd3-internals.test.ts fails, and the keyspace client's debug hook
// (KeyspaceOptions.debug) names the path on the first watch stream.

import type { Etcd3, IDuplexStream, IWatchRequest, IWatchResponse } from 'etcd3';

/** Which Watch stream was opened: with `hasleader` metadata, or etcd3's public one without it. */
export type WatchStreamPath = 'hasleader' | 'public';

type PoolConn = {
  client: { watch(md: unknown, opts: object): IDuplexStream<IWatchRequest, IWatchResponse> };
  metadata: { clone(): { set(k: string, v: string): void } };
};
type Pool = { withConnection(service: string, fn: (c: PoolConn) => unknown): Promise<unknown> };

/** etcd3's private connection pool, if it still has the shape we use. */
export function etcd3Pool(rpc: Etcd3): Pool | undefined {
  const pool = (rpc as unknown as { pool?: Partial<Pool> }).pool;
  return typeof pool?.withConnection === 'function' ? (pool as Pool) : undefined;
}

/** Opens a raw Watch stream, with `hasleader: true` metadata when etcd3's pool allows it. */
export async function openWatchStream(rpc: Etcd3): Promise<{ stream: IDuplexStream<IWatchRequest, IWatchResponse>; path: WatchStreamPath }> {
  const pool = etcd3Pool(rpc);
  if (pool === undefined) return { stream: await rpc.watchClient.watch(), path: 'public' };
  const stream = (await pool.withConnection('Watch', ({ client, metadata }) => {
    const md = metadata.clone();
    md.set('hasleader', 'true');
    return client.watch(md, {});
  })) as IDuplexStream<IWatchRequest, IWatchResponse>;
  return { stream, path: 'hasleader' };
}
