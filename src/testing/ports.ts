// Ephemeral loopback ports for test processes.
//
// A port is chosen by binding 127.0.0.1:0 and reading the kernel's pick. When several ports are
// needed at once, every listener is held open until all are chosen, so the kernel cannot hand
// out the same port twice. Ports handed out recently by this process are also remembered and
// skipped, since a closed port is immediately eligible for reuse by the kernel. (Another process
// may still grab a port between our close and the child's bind; that window is tiny.)

import { createServer, type Server } from 'node:net';

const HOST = '127.0.0.1';
const recentlyIssued = new Set<number>();
const RECENT_LIMIT = 4096;

function listenEphemeral(): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen({ host: HOST, port: 0, exclusive: true }, () => resolve(srv));
  });
}

function closeServer(srv: Server): Promise<void> {
  return new Promise((resolve) => srv.close(() => resolve()));
}

/** Reserve `count` distinct free ports on 127.0.0.1. */
export async function freePorts(count: number): Promise<number[]> {
  const held: Server[] = [];
  const ports: number[] = [];
  try {
    let attempts = 0;
    while (ports.length < count) {
      if (++attempts > count * 50) throw new Error(`could not find ${count} free ports on ${HOST}`);
      const srv = await listenEphemeral();
      held.push(srv);
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') continue;
      if (recentlyIssued.has(addr.port) || ports.includes(addr.port)) continue; // keep holding it, try again
      ports.push(addr.port);
    }
  } finally {
    await Promise.all(held.map(closeServer));
  }
  for (const p of ports) {
    if (recentlyIssued.size >= RECENT_LIMIT) recentlyIssued.clear();
    recentlyIssued.add(p);
  }
  return ports;
}

/** One free port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const [p] = await freePorts(1);
  return p!;
}
