// Route and endpoint helpers.
import { ValidationError } from './errors.js';
import type { ProcessSpec_ID, Route } from './gen/broker/protocol.js';

/** A route with no members and no primary. */
export function emptyRoute(): Route {
  return { members: [], primary: -1, endpoints: [] };
}

/** The primary member, or undefined when the route has none. */
export function routePrimary(route: Route | undefined): ProcessSpec_ID | undefined {
  if (!route || route.primary < 0) return undefined;
  return route.members[route.primary];
}

/** Members other than the primary, in route order. */
export function routeReplicas(route: Route | undefined): ProcessSpec_ID[] {
  if (!route) return [];
  return route.members.filter((_, i) => i !== route.primary);
}

export function processIdEquals(a: ProcessSpec_ID | undefined, b: ProcessSpec_ID | undefined): boolean {
  return (a?.zone ?? '') === (b?.zone ?? '') && (a?.suffix ?? '') === (b?.suffix ?? '');
}

/** Orders process IDs by (zone, suffix). */
export function compareProcessIds(a: ProcessSpec_ID, b: ProcessSpec_ID): number {
  if (a.zone !== b.zone) return a.zone < b.zone ? -1 : 1;
  if (a.suffix !== b.suffix) return a.suffix < b.suffix ? -1 : 1;
  return 0;
}

/** Whether two routes have the same members and primary (endpoints are not compared). */
export function routeEquals(a: Route | undefined, b: Route | undefined): boolean {
  const ra = a ?? emptyRoute();
  const rb = b ?? emptyRoute();
  if (ra.primary !== rb.primary || ra.members.length !== rb.members.length) return false;
  return ra.members.every((m, i) => processIdEquals(m, rb.members[i]));
}

/** Endpoint of member `i`, or undefined when unknown. */
export function memberEndpoint(route: Route | undefined, i: number): string | undefined {
  const ep = route?.endpoints[i];
  return ep ? ep : undefined;
}

/** Index of `id` among the route's members, or -1. */
export function memberIndex(route: Route | undefined, id: ProcessSpec_ID | undefined): number {
  if (!route || !id) return -1;
  return route.members.findIndex((m) => processIdEquals(m, id));
}

/** Human form of a process ID: `zone/suffix` (just the suffix when the zone is empty). */
export function formatProcessID(id: ProcessSpec_ID | undefined): string {
  if (!id) return '';
  return id.zone ? `${id.zone}/${id.suffix}` : id.suffix;
}

export interface ParsedEndpoint {
  /** gRPC dial target: `host:port` or `unix:///abs/path`. */
  target: string;
  /** Whether the connection uses TLS. */
  secure: boolean;
  /** Socket path of a unix endpoint. */
  unixPath?: string;
}

/**
 * Maps an endpoint URL to a gRPC dial target: `http://h:p` → `h:p`, `https://h` →
 * `h:443`, `http://h` → `h:80`, `unix://host/abs/path` → `unix:///abs/path`.
 */
export function parseEndpoint(endpoint: string): ParsedEndpoint {
  const bad = (why: string): never => {
    throw new ValidationError(why, `endpoint ${JSON.stringify(endpoint)}`);
  };
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return bad('not an absolute URL');
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (scheme === 'unix') {
    if (!url.host) bad('unix endpoint needs a host (unix://host/abs/socket/path)');
    const path = decodeURIComponent(url.pathname);
    if (!path.startsWith('/') || path === '/') bad('unix endpoint needs an absolute socket path');
    return { target: `unix://${path}`, secure: false, unixPath: path };
  }
  if (scheme !== 'http' && scheme !== 'https') bad(`unsupported scheme ${JSON.stringify(scheme)} (use http, https or unix)`);
  if (!url.hostname) bad('missing host');
  const secure = scheme === 'https';
  // WHATWG URL drops default ports; put them back explicitly.
  const port = url.port || (secure ? '443' : '80');
  return { target: `${url.hostname}:${port}`, secure };
}
