// The primary's side of Replicate streams, spoken over node:http2 directly instead of through
// grpc-js's client.
//
// Every content message of an append goes to every replica. Through grpc-js each one was framed
// into a fresh buffer (the 5-byte message prefix, then a copy of the whole message), per replica,
// after passing several layers of call objects with a promise and a nextTick each; those buffers
// were most of what the primary's garbage collector had to do. Here a content message is written
// as a small head (message prefix, content's tag and length), the content itself (a view of the
// client's message as grpc-js received it) and a few bytes of content_delta after it: HTTP/2
// sends them without copying, and the small buffers are shared by all replicas. The bytes are
// the generated encoder's.
//
// What is spoken is plain gRPC over HTTP/2 (any server of protocol.Journal answers, ours or
// upstream's): a POST to /protocol.Journal/Replicate with content-type application/grpc and
// `te: trailers`, length-prefixed messages both ways (never compressed: we announce no
// encoding), and the call's status in the trailers (or in the headers, for a response that is
// only a status).

import * as http2 from 'node:http2';
import { connect as netConnect, isIP } from 'node:net';
import { connect as tlsConnect, createSecureContext, type SecureContext } from 'node:tls';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { ReplicateResponse } from '../../lib/protocol/gen/broker/protocol.js';
import { decodeGrpcMessage, MessageDeframer } from '../../lib/protocol/grpc-frame.js';
import { putVarint, varintSize } from '../../lib/protocol/varint.js';

const PATH = '/protocol.Journal/Replicate';
const CONTENT_TAG = (4 << 3) | 2; // ReplicateRequest.content, length-delimited
const DELTA_TAG = (5 << 3) | 0; // ReplicateRequest.content_delta, varint

/** A gRPC status other than OK that ended a call (code and message as grpc-js words them). */
export class ReplicateCallError extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(`${code} ${GrpcStatus[code] ?? 'UNKNOWN'}: ${details}`);
  }
}

/**
 * The framed ReplicateRequest {content, content_delta} as the buffers to write in order: a head
 * (the message prefix, content's tag and length), the content itself (not copied), and, when
 * content_delta is not zero, a tail with it. Without the prefix these are the generated
 * encoder's bytes for that message. Head and tail are shared by every replica.
 */
export function contentFrame(content: Buffer, delta: number): Buffer[] {
  if (!Number.isSafeInteger(delta) || delta < 0) throw new RangeError(`content delta ${delta} out of range`);
  const lengthBytes = varintSize(content.length);
  const tail = delta !== 0 ? Buffer.allocUnsafe(1 + varintSize(delta)) : undefined;
  const head = Buffer.allocUnsafe(5 + 1 + lengthBytes);
  head[0] = 0;
  head.writeUInt32BE(1 + lengthBytes + content.length + (tail?.length ?? 0), 1);
  head[5] = CONTENT_TAG;
  putVarint(head, 6, content.length);
  if (!tail) return [head, content];
  tail[0] = DELTA_TAG;
  putVarint(tail, 1, delta);
  return [head, content, tail];
}

export interface ReplicateCallHandlers {
  onResponse(r: ReplicateResponse): void;
  /** The call is over: an error, or undefined when the replica ended it with status OK. */
  onEnd(err: Error | undefined): void;
}

/** One Replicate stream to a replica. */
export class ReplicateCall {
  private readonly deframer = new MessageDeframer();
  private ended = false;
  private status: { code: number; details: string } | undefined;

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly handlers: ReplicateCallHandlers,
  ) {
    stream.on('response', (headers) => {
      const code = headers[':status'];
      if (code !== 200) return this.fail(new ReplicateCallError(GrpcStatus.UNKNOWN, `replica answered HTTP status ${code}`));
      // A response that is only a status carries it in the headers.
      if (headers['grpc-status'] !== undefined) this.takeStatus(headers);
    });
    stream.on('trailers', (trailers) => this.takeStatus(trailers));
    stream.on('data', (chunk: Buffer) => this.onData(chunk));
    stream.on('error', (e: Error) => this.finish(e));
    stream.on('close', () => {
      if (this.status === undefined) {
        const rst = stream.rstCode;
        return this.finish(new ReplicateCallError(GrpcStatus.UNAVAILABLE, rst ? `stream reset by the replica (HTTP/2 code ${rst})` : 'the stream closed without a status'));
      }
      this.settle();
    });
  }

  /**
   * The replica sent the call's status: once every message before it is read, the call is over,
   * whether or not our side was still sending (the stream is then closed from our side too).
   */
  private takeStatus(h: http2.IncomingHttpHeaders): void {
    this.readStatus(h);
    if (this.stream.readableEnded) this.settle();
    else this.stream.once('end', () => this.settle());
  }

  private settle(): void {
    const s = this.status!;
    this.finish(s.code === GrpcStatus.OK ? undefined : new ReplicateCallError(s.code, s.details));
    if (!this.stream.destroyed) this.stream.close();
  }

  private readStatus(h: http2.IncomingHttpHeaders): void {
    const raw = h['grpc-status'];
    const code = Number(Array.isArray(raw) ? raw[0] : raw);
    const details = decodeGrpcMessage(String(h['grpc-message'] ?? ''));
    this.status = { code: Number.isInteger(code) ? code : GrpcStatus.UNKNOWN, details };
  }

  private onData(chunk: Buffer): void {
    if (this.ended) return;
    const problem = this.deframer.push(chunk, (m) => {
      let r: ReplicateResponse;
      try {
        r = ReplicateResponse.decode(m);
      } catch (e) {
        this.fail(new ReplicateCallError(GrpcStatus.INTERNAL, `replica sent an undecodable ReplicateResponse: ${(e as Error).message}`));
        return false;
      }
      this.handlers.onResponse(r);
      return !this.ended;
    });
    // The deframer has no size bound here (a replica's answers are a few fields each), so the
    // only problem it can find is a compressed message.
    if (problem) this.fail(new ReplicateCallError(GrpcStatus.INTERNAL, 'replica sent a compressed message'));
  }

  private fail(e: Error): void {
    this.finish(e);
    this.cancel();
  }

  private finish(e: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.handlers.onEnd(e);
  }

  /** Writes framed message bytes (several buffers go out as one write, none of them copied). */
  write(...bufs: Buffer[]): void {
    if (this.ended || this.stream.destroyed) return;
    if (bufs.length === 1) {
      this.stream.write(bufs[0]);
      return;
    }
    this.stream.cork();
    for (const b of bufs) this.stream.write(b);
    this.stream.uncork();
  }

  /** Half-closes our side. */
  end(): void {
    if (!this.stream.destroyed) this.stream.end();
  }

  /** Ends the call at once (RST_STREAM CANCEL), as a cancelled gRPC call does. */
  cancel(): void {
    if (!this.stream.destroyed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }
}

/**
 * One HTTP/2 connection per replica endpoint, shared by every Replicate stream to it. An
 * https:// endpoint is dialled with TLS (`tls`, default the system roots), offering only h2 as
 * gRPC clients do, and the replica's certificate must verify.
 */
export class ReplicateSessions {
  private readonly sessions = new Map<string, http2.ClientHttp2Session>();

  constructor(private readonly tls?: SecureContext) {}

  private session(endpoint: string): http2.ClientHttp2Session {
    const cur = this.sessions.get(endpoint);
    if (cur && !cur.closed && !cur.destroyed) return cur;
    const u = new URL(endpoint);
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    const secure = u.protocol === 'https:';
    const port = Number(u.port || (secure ? 443 : 80));
    const s = http2.connect(`${secure ? 'https' : 'http'}://${u.host}`, {
      createConnection: secure
        ? () => {
            const t = tlsConnect({
              host,
              port,
              secureContext: this.tls ?? createSecureContext({}),
              ALPNProtocols: ['h2'],
              // RFC 6066 allows only host names as SNI; the certificate is still checked against an IP.
              ...(isIP(host) ? {} : { servername: host }),
            });
            t.setNoDelay(true);
            return t;
          }
        : () => netConnect({ host, port, noDelay: true }),
    });
    const drop = (): void => {
      if (this.sessions.get(endpoint) === s) this.sessions.delete(endpoint);
    };
    // A failed connection fails its streams (each reports it); the next pipeline connects anew.
    s.on('error', drop);
    s.on('goaway', drop);
    s.on('close', drop);
    this.sessions.set(endpoint, s);
    return s;
  }

  /**
   * Opens a Replicate stream to the broker at `endpoint` (an http:// or https:// URL), with
   * `authorization` as its metadata when given.
   */
  open(endpoint: string, handlers: ReplicateCallHandlers, authorization?: string): ReplicateCall {
    const s = this.session(endpoint);
    const stream = s.request(
      {
        ':method': 'POST',
        ':path': PATH,
        ':scheme': new URL(endpoint).protocol === 'https:' ? 'https' : 'http',
        ...(authorization !== undefined ? { authorization } : {}),
        ':authority': new URL(endpoint).host,
        'content-type': 'application/grpc',
        te: 'trailers',
        'user-agent': 'gazette-ts-broker',
      },
      { endStream: false },
    );
    return new ReplicateCall(stream, handlers);
  }

  close(): void {
    for (const s of this.sessions.values()) s.destroy();
    this.sessions.clear();
  }
}
