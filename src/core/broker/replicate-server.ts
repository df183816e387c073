// The replica's side of Replicate streams, taken off grpc-js's server: the service port hands
// an HTTP/2 stream for /protocol.Journal/Replicate to `RawReplicateCall`, everything else to
// grpc-js as before.
//
// A replica receives every byte of the journals it holds; through grpc-js's server each message
// went through a stream decoder, a promise to "decompress" it, an object-mode stream and its
// async iterator. Here messages are cut out of the HTTP/2 DATA chunks as they come (a message
// that lies within one chunk is a view of it, one spread over several is copied together once)
// and decoded with the same decoder as before (codec.ts), and `serveReplicate` reads them
// through an object with the few members of grpc-js's call that it uses.
//
// What the primary sees is plain gRPC: response headers, length-prefixed ReplicateResponses,
// and the status in the trailers (alone in the headers when nothing was sent before it), the
// message percent-encoded as gRPC has it. A request with a message encoding other than identity
// is refused with UNIMPLEMENTED (we announce none, and no primary compresses Replicate).

import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { status as GrpcStatus, type Server as GrpcServer } from '@grpc/grpc-js';
import { ReplicateResponse, type ReplicateRequest } from '../../lib/protocol/gen/broker/protocol.js';
import { encodeGrpcMessage, frameMessage, MessageDeframer } from '../../lib/protocol/grpc-frame.js';
import { decodeReplicateRequest } from './codec.js';
import { http2ServersOf } from './grpc-internals.js';

export const REPLICATE_PATH = '/protocol.Journal/Replicate';

/** Messages decoded and not yet taken before the stream is paused (HTTP/2 flow control then holds the sender). */
const QUEUE_HIGH_WATER = 16;

/** One Replicate call at this broker, shaped as the part of grpc-js's ServerDuplexStream that `serveReplicate` uses. */
export class RawReplicateCall {
  private readonly queue: ReplicateRequest[] = [];
  private waiter: ((r: IteratorResult<ReplicateRequest>) => void) | undefined;
  private inputDone = false;
  private paused = false;
  private readonly deframer: MessageDeframer;
  private headersSent = false;
  private finished = false;
  private trailers: Record<string, string> | undefined;
  /** The request's metadata, as much of grpc-js's Metadata as verifying it needs. */
  readonly metadata: { get(key: string): string[] };

  constructor(
    private readonly stream: ServerHttp2Stream,
    private readonly maxMessageBytes: number,
    headers: IncomingHttpHeaders = {},
  ) {
    this.metadata = {
      get: (key) => {
        const v = headers[key.toLowerCase()];
        return v === undefined ? [] : Array.isArray(v) ? v : [v];
      },
    };
    this.deframer = new MessageDeframer(maxMessageBytes);
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('end', () => this.endInput());
    stream.on('error', () => this.endInput());
    stream.on('close', () => {
      this.finished = true;
      this.endInput();
    });
    stream.on('wantTrailers', () => {
      if (!stream.destroyed) stream.sendTrailers(this.trailers ?? { 'grpc-status': String(GrpcStatus.OK) });
    });
  }

  /** Refuses a request we cannot serve before reading it (a message encoding we do not speak). */
  static refusal(headers: IncomingHttpHeaders): string | undefined {
    const enc = headers['grpc-encoding'];
    if (enc !== undefined && enc !== 'identity') return `message encoding ${String(enc)} is not supported`;
    return undefined;
  }

  private onData(chunk: Buffer): void {
    if (this.inputDone) return;
    const problem = this.deframer.push(chunk, (m) => {
      this.deliver(m);
      return !this.inputDone;
    });
    if (problem?.kind === 'compressed') this.fail(GrpcStatus.INTERNAL, 'replicate: a compressed message without a message encoding');
    else if (problem) this.fail(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${problem.length} vs. ${this.maxMessageBytes})`);
  }

  private deliver(bytes: Buffer): void {
    let r: ReplicateRequest;
    try {
      r = decodeReplicateRequest(bytes);
    } catch (e) {
      return this.fail(GrpcStatus.INTERNAL, `Error deserializing request: ${(e as Error).message}`);
    }
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w({ value: r, done: false });
      return;
    }
    this.queue.push(r);
    if (this.queue.length >= QUEUE_HIGH_WATER && !this.paused) {
      this.paused = true;
      this.stream.pause();
    }
  }

  private endInput(): void {
    if (this.inputDone) return;
    this.inputDone = true;
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      if (this.queue.length === 0) w({ value: undefined, done: true });
    }
  }

  /** Stops reading and ends the call with `code` (as a handler's emitted error would). */
  private fail(code: GrpcStatus, details: string): void {
    this.queue.length = 0;
    this.endInput();
    this.finish(code, details);
  }

  private next(): Promise<IteratorResult<ReplicateRequest>> {
    const r = this.queue.shift();
    if (r) {
      if (this.paused && this.queue.length < QUEUE_HIGH_WATER / 2 && !this.stream.destroyed) {
        this.paused = false;
        this.stream.resume();
      }
      return Promise.resolve({ value: r, done: false });
    }
    if (this.inputDone) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiter = resolve));
  }

  [Symbol.asyncIterator](): AsyncIterator<ReplicateRequest> {
    return {
      next: () => this.next(),
      return: () => {
        this.endInput();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  private sendHeaders(): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  }

  /** Sends one response. */
  write(r: Partial<ReplicateResponse>): boolean {
    if (this.finished || this.stream.destroyed) return false;
    this.sendHeaders();
    return this.stream.write(frameMessage(ReplicateResponse.encode(ReplicateResponse.fromPartial(r)).finish()));
  }

  /** Ends the call with status OK. */
  end(): void {
    this.finish(GrpcStatus.OK, '');
  }

  /** `emit('error', e)` ends the call with e's gRPC code and details, as on grpc-js's call. */
  emit(event: string, e?: { code?: number; details?: string; message?: string }): boolean {
    if (event !== 'error') return false;
    this.finish(typeof e?.code === 'number' ? e.code : GrpcStatus.UNKNOWN, e?.details ?? e?.message ?? '');
    return true;
  }

  private finish(code: number, details: string): void {
    if (this.finished) return;
    this.finished = true;
    if (this.stream.destroyed) return;
    const trailers: Record<string, string> = { 'grpc-status': String(code) };
    if (details !== '') trailers['grpc-message'] = encodeGrpcMessage(details);
    if (!this.headersSent) {
      // Nothing sent yet: the status alone, in the headers.
      this.headersSent = true;
      this.stream.respond({ ':status': 200, 'content-type': 'application/grpc', ...trailers }, { endStream: true });
    } else {
      this.trailers = trailers;
      this.stream.end();
    }
  }
}

/**
 * Routes the gRPC server's Replicate streams to `serve` (as RawReplicateCalls), every other
 * stream to grpc-js. It reaches grpc-js's HTTP/2 servers (grpc-internals.ts) and puts itself in
 * front of their 'stream' listeners; false when it cannot, and grpc-js then serves Replicate as
 * any other method.
 */
export function routeReplicate(grpc: GrpcServer, serve: (call: RawReplicateCall) => void, maxMessageBytes: number): boolean {
  const servers = http2ServersOf(grpc, 'replicate');
  if (servers === undefined) return false;
  let hooked = false;
  for (const s of servers) {
    const grpcListeners = s.listeners('stream') as ((...args: unknown[]) => void)[];
    if (grpcListeners.length === 0) continue;
    s.removeAllListeners('stream');
    s.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, ...rest: unknown[]) => {
      const ct = headers['content-type'];
      if (headers[':path'] === REPLICATE_PATH && headers[':method'] === 'POST' && typeof ct === 'string' && ct.startsWith('application/grpc')) {
        const call = new RawReplicateCall(stream, maxMessageBytes, headers);
        const refused = RawReplicateCall.refusal(headers);
        if (refused) return call.emit('error', { code: GrpcStatus.UNIMPLEMENTED, details: refused });
        serve(call);
        return;
      }
      for (const l of grpcListeners) l.call(s, stream, headers, ...rest);
    });
    hooked = true;
  }
  return hooked;
}
