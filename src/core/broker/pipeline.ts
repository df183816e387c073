// The primary's replication pipeline of one journal: one Replicate stream to every other member
// of the route. Content is forwarded as it arrives; a proposal with `acknowledge` is answered by
// every replica, and an append is acknowledged to its client only once all of them accepted its
// commit. A pipeline belongs to one route (at one etcd revision); when the route changes, or a
// stream fails, it is torn down and the next append builds a new one.

import { Status, type Fragment, type Header, type LabelSet, type ReplicateRequest, type ReplicateResponse, type Route } from '../../lib/protocol/gen/broker/protocol.js';
import { encodeReplicateRequest } from './codec.js';
import type { Peers } from './peers.js';
import { frameMessage } from '../../lib/protocol/grpc-frame.js';
import { contentFrame, type ReplicateCall } from './replicate-client.js';

export class PipelineError extends Error {}

class PeerStream {
  private readonly queue: (ReplicateResponse | Error)[] = [];
  private wake: (() => void) | undefined;
  private failed: Error | undefined;
  private readonly call: ReplicateCall;

  constructor(
    readonly endpoint: string,
    peers: Peers,
    journal: string,
  ) {
    this.call = peers.openReplicate(endpoint, journal, {
      onResponse: (r) => this.push(r),
      onEnd: (e) => this.fail(e ?? new PipelineError(`replica ${endpoint} closed its Replicate stream`)),
    });
  }

  private push(x: ReplicateResponse | Error): void {
    this.queue.push(x);
    this.wake?.();
  }

  private fail(e: Error): void {
    if (this.failed) return;
    this.failed = e;
    this.push(e);
  }

  /** Writes a framed ReplicateRequest, given as one buffer or several that follow each other. */
  send(...framed: Buffer[]): void {
    if (this.failed) throw new PipelineError(`replica ${this.endpoint}: ${this.failed.message}`);
    this.call.write(...framed);
  }

  async recv(timeoutMs: number): Promise<ReplicateResponse> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length === 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new PipelineError(`replica ${this.endpoint} did not answer within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.wake = () => {
          clearTimeout(t);
          r();
        };
      });
      this.wake = undefined;
    }
    const x = this.queue.shift()!;
    if (x instanceof Error) throw new PipelineError(`replica ${this.endpoint}: ${x.message}`);
    return x;
  }

  get broken(): boolean {
    return this.failed !== undefined;
  }

  close(): void {
    try {
      this.call.end();
    } catch {
      // already gone
    }
    this.call.cancel();
  }
}

export interface Ack {
  endpoint: string;
  response: ReplicateResponse;
}

export class Pipeline {
  private readonly streams: PeerStream[] = [];
  private first = true;

  /** `routeKey` identifies the route (and revision) the pipeline was built for. */
  constructor(
    readonly routeKey: string,
    private readonly header: Header,
    route: Route,
    localIndex: number,
    peers: Peers,
    journal: string,
  ) {
    route.members.forEach((m, i) => {
      if (i === localIndex) return;
      const endpoint = route.endpoints[i];
      if (!endpoint) throw new PipelineError(`replica ${m.zone}#${m.suffix} has no endpoint`);
      // The streams take framed requests (replicate-client.ts): a content message's small
      // head and tail are made once for every replica, and its content is never copied.
      this.streams.push(new PeerStream(endpoint, peers, journal));
    });
    this.memberIds = route.members.filter((_, i) => i !== localIndex);
  }

  private readonly memberIds: Route['members'];

  get broken(): boolean {
    return this.streams.some((s) => s.broken);
  }

  get size(): number {
    return this.streams.length;
  }

  /** Send `proposal` (with `registers`) to every replica and collect their answers. */
  async propose(proposal: Fragment, registers: LabelSet, timeoutMs = 10_000): Promise<Ack[]> {
    this.streams.forEach((s, i) => {
      const req: Partial<ReplicateRequest> = { proposal, registers, acknowledge: true };
      if (this.first) req.header = { ...this.header, process_id: { ...this.memberIds[i]! } };
      s.send(frameMessage(encodeReplicateRequest(req)));
    });
    this.first = false;
    const acks: Ack[] = [];
    for (const s of this.streams) acks.push({ endpoint: s.endpoint, response: await s.recv(timeoutMs) });
    return acks;
  }

  /** Forward content; `delta` is the number of bytes staged before it since the last commit. */
  content(content: Buffer, delta: number): void {
    if (this.streams.length === 0) return;
    const frame = contentFrame(content, delta);
    for (const s of this.streams) s.send(...frame);
  }

  close(): void {
    for (const s of this.streams) s.close();
  }
}

/** Whether every replica accepted. */
export function allOk(acks: Ack[]): boolean {
  return acks.every((a) => a.response.status === Status.OK);
}
