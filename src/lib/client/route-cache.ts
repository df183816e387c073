// Route cache and dispatch: remembers item → Route for a while and picks which
// member endpoint an RPC about that item should be sent to.
import type { Route } from '../protocol/gen/broker/protocol.js';

interface Entry {
  route: Route;
  expires: number;
}

/** An LRU of item (journal or shard name) → Route whose entries expire after `ttlMs`. */
export class RouteCache {
  private readonly map = new Map<string, Entry>();

  constructor(
    readonly size: number,
    readonly ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(item: string): Route | undefined {
    const e = this.map.get(item);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.map.delete(item);
      return undefined;
    }
    // Refresh recency.
    this.map.delete(item);
    this.map.set(item, e);
    return e.route;
  }

  /** Records a route; empty routes (no members) are not worth caching and drop the entry. */
  set(item: string, route: Route | undefined): void {
    if (this.size <= 0) return;
    this.map.delete(item);
    if (!route || route.members.length === 0) return;
    this.map.set(item, { route, expires: this.now() + this.ttlMs });
    while (this.map.size > this.size) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
    }
  }

  delete(item: string): void {
    this.map.delete(item);
  }

  get length(): number {
    return this.map.size;
  }
}

/** Connection health of an endpoint as the pool sees it. */
export type EndpointState = 'ready' | 'connecting' | 'idle' | 'failed' | 'none';

export interface DispatchOptions {
  /** Require the route's primary (appends). */
  primary?: boolean;
  /** Preferred zone of the caller. */
  zone?: string;
  /** Connection state of an endpoint, if known. */
  state?: (endpoint: string) => EndpointState;
}

/**
 * Chooses the member endpoint to dispatch to, or undefined to use the configured service address.
 * With `primary`, only the primary's endpoint qualifies. Otherwise members are ranked by same zone
 * first, then a connection that has not failed, then one that is ready; ties keep route order.
 */
export function pickEndpoint(route: Route | undefined, opts: DispatchOptions = {}): string | undefined {
  if (!route || route.members.length === 0 || route.endpoints.length !== route.members.length) return undefined;
  if (opts.primary) {
    if (route.primary < 0 || route.primary >= route.members.length) return undefined;
    return route.endpoints[route.primary] || undefined;
  }
  let best: string | undefined;
  let bestScore = -1;
  for (let i = 0; i < route.members.length; i++) {
    const ep = route.endpoints[i];
    if (!ep) continue;
    const st = opts.state ? opts.state(ep) : 'none';
    const score = (opts.zone && route.members[i]!.zone === opts.zone ? 4 : 0) + (st !== 'failed' ? 2 : 0) + (st === 'ready' ? 1 : 0);
    if (score > bestScore) {
      best = ep;
      bestScore = score;
    }
  }
  return best;
}
