// A lean unary gRPC call over node:http2, for the one unary RPC a command makes in bulk: the
// Apply batches of `journals apply` (a hundred sequential calls for 10,000 journals). grpc-js
// spends about a millisecond of CPU on each unary call (its call stack of resolving, load
// balancing and filter layers, promises for call credentials, metadata copies), and the next
// batch waits for it; it also costs some 20 ms at start-up to set a channel up (name resolution,
// address sorting with Node's IPv6 pattern, a subchannel). This call is a POST on one HTTP/2
// session per endpoint with the same gRPC framing, headers, deadline and status handling.
//
// It never decides on its own how a connection fails: a session is used only once it has
// connected (TLS verified, h2 negotiated). Until then, and whenever the session has failed or
// gone away, the caller takes the grpc-js channel, which connects, waits and reports connection
// problems exactly as it always did. What happens on a connected session is mapped to the same
// codes and details grpc-js gives: the server's grpc-status and grpc-message (percent-decoded),
// an HTTP status without a gRPC one, a stream reset, a dropped connection, the local deadline
// (with `remote_addr=`, which tells a call that got no answer from one that never connected), an
// oversized or missing response message.
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect, type SecureContext } from 'node:tls';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { decodeGrpcMessage, messagePrefix } from '../protocol/grpc-frame.js';

const {
  NGHTTP2_CANCEL,
  NGHTTP2_NO_ERROR,
  NGHTTP2_REFUSED_STREAM,
  NGHTTP2_ENHANCE_YOUR_CALM,
  NGHTTP2_INADEQUATE_SECURITY,
  NGHTTP2_INTERNAL_ERROR,
  NGHTTP2_FLAG_END_STREAM,
} = http2.constants;

/** After a session fails to connect, how long calls keep to grpc-js before another try. */
const RECONNECT_AFTER_MS = 1000;

/** Where and how a lean session connects. */
export interface LeanTarget {
  /** `host:port`, or undefined for a unix socket. */
  hostPort?: string;
  host?: string;
  port?: number;
  unixPath?: string;
  /** TLS context of an https:// endpoint; undefined for plain text. */
  tls?: SecureContext;
  /** Largest response message accepted (as grpc-js' max_receive_message_length). */
  maxReceive: number;
  /** grpc-js' user agent string, sent as it sends it. */
  userAgent: string;
}

/** A started call: cancel() ends it (the callback then gets CANCELLED). */
export interface LeanCall {
  cancel(): void;
}

/** The error grpc-js would give for `code` and `details` (its callErrorFromStatus). */
function callError(code: number, details: string, metadata: Metadata = new Metadata()): ServiceError {
  const name = GrpcStatus[code] ?? String(code);
  const err = new Error(`${code} ${name}: ${details}`) as ServiceError;
  err.code = code;
  err.details = details;
  err.metadata = metadata;
  return err;
}

/** grpc-js' mapping of an HTTP status without a gRPC status. */
function httpStatusError(status: number): ServiceError {
  const details = `Received HTTP status code ${status}`;
  switch (status) {
    case 400:
      return callError(GrpcStatus.INTERNAL, details);
    case 401:
      return callError(GrpcStatus.UNAUTHENTICATED, details);
    case 403:
      return callError(GrpcStatus.PERMISSION_DENIED, details);
    case 404:
      return callError(GrpcStatus.UNIMPLEMENTED, details);
    case 429:
    case 502:
    case 503:
    case 504:
      return callError(GrpcStatus.UNAVAILABLE, details);
    default:
      return callError(GrpcStatus.UNKNOWN, details);
  }
}

/** The grpc-timeout header of a deadline, as grpc-js writes it. */
function timeoutHeader(deadline: number): string {
  const ms = Math.max(deadline - Date.now(), 0);
  if (ms < 1e8) return `${Math.ceil(ms)}m`;
  if (ms / 1000 < 1e8) return `${Math.ceil(ms / 1000)}S`;
  if (ms / 60_000 < 1e8) return `${Math.ceil(ms / 60_000)}M`;
  return `${Math.ceil(ms / 3_600_000)}H`;
}

/** One HTTP/2 session to an endpoint, (re)connected in the background. */
export class LeanSession {
  private session: ClientHttp2Session | undefined;
  private connecting = false;
  private failedAt = 0;
  private closed = false;
  private peer = '';
  /**
   * Calls in flight on each session. A session keeps the process alive only while it carries
   * calls; counted per session, because calls in flight on one that is going away (after a
   * GOAWAY, say) may overlap the first calls on its successor.
   */
  private readonly active = new Map<ClientHttp2Session, number>();
  /** The socket being connected, until a session takes it. */
  private pending: Socket | undefined;

  constructor(private readonly target: LeanTarget) {}

  /**
   * Whether a call can go out on this session now. When it cannot, a connection is started (at
   * most one at a time, and not again within a second of a failed one) for later calls.
   */
  ready(): boolean {
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return true;
    this.session = undefined;
    if (!this.closed && !this.connecting && Date.now() - this.failedAt >= RECONNECT_AFTER_MS) this.start();
    return false;
  }

  /** Where the session stands: 'none' before any connection was started. */
  state(): 'none' | 'connecting' | 'ready' | 'failed' {
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return 'ready';
    if (this.connecting) return 'connecting';
    return this.failedAt > 0 ? 'failed' : 'none';
  }

  /** Starts connecting (see ready()); never throws. */
  start(): void {
    if (this.closed || this.connecting || this.session) return;
    this.connecting = true;
    const t = this.target;
    let socket: Socket | undefined;
    const fail = () => {
      this.pending = undefined;
      this.connecting = false;
      this.failedAt = Date.now();
      socket?.destroy();
    };
    try {
      if (t.unixPath !== undefined) {
        const plain = netConnect(t.unixPath);
        socket = plain;
        plain.once('connect', () => this.open(plain));
      } else if (t.tls) {
        const host = t.host!;
        const tls = tlsConnect({ host, port: t.port!, secureContext: t.tls, ALPNProtocols: ['h2'], ...(isIP(host) ? {} : { servername: host }) });
        socket = tls;
        tls.once('secureConnect', () => {
          // Anything grpc-js would refuse is left to it, to report as it does.
          if (!tls.authorized || tls.alpnProtocol !== 'h2') fail();
          else this.open(tls);
        });
      } else {
        const plain = netConnect({ host: t.host!, port: t.port! });
        socket = plain;
        plain.once('connect', () => this.open(plain));
      }
      socket.once('error', fail);
      socket.unref();
      this.pending = socket;
    } catch {
      fail();
    }
  }

  private open(socket: Socket): void {
    this.pending = undefined;
    socket.removeAllListeners('error');
    if (this.closed) {
      socket.destroy();
      this.connecting = false;
      return;
    }
    const t = this.target;
    this.peer = t.unixPath ?? `${socket.remoteAddress?.includes(':') ? `[${socket.remoteAddress}]` : socket.remoteAddress}:${socket.remotePort}`;
    const authority = t.unixPath !== undefined ? 'localhost' : t.hostPort!;
    const s = http2.connect(`${t.tls ? 'https' : 'http'}://${authority}`, { createConnection: () => socket });
    const drop = () => {
      if (this.session === s) this.session = undefined;
    };
    s.on('error', () => {
      drop();
      this.failedAt = Date.now();
    });
    s.on('goaway', drop);
    s.on('close', drop);
    s.once('connect', () => {
      this.connecting = false;
      if (this.closed) s.destroy();
      else this.session = s;
    });
    s.once('close', () => {
      if (this.connecting) {
        this.connecting = false;
        this.failedAt = Date.now();
      }
    });
    s.unref();
  }

  /** Closes the session; calls in flight are cut off. */
  close(): void {
    this.closed = true;
    this.pending?.destroy();
    this.pending = undefined;
    this.session?.destroy();
    this.session = undefined;
  }

  /**
   * Makes a unary call on the session (which must be ready()): `request` is the encoded message;
   * `headers` the call's metadata as HTTP/2 headers. The callback gets the decoded response or
   * an error shaped like grpc-js'.
   */
  unary<Res>(
    path: string,
    request: Buffer,
    headers: Record<string, string | string[]>,
    deadline: number | undefined,
    decode: (buf: Buffer) => Res,
    cb: (err: ServiceError | null, res?: Res) => void,
  ): LeanCall {
    const s = this.session!;
    const t = this.target;
    const req: Record<string, string | string[]> = {
      ...headers,
      ':method': 'POST',
      ':scheme': t.tls ? 'https' : 'http',
      ':path': path,
      ':authority': t.unixPath !== undefined ? 'localhost' : t.hostPort!,
      'content-type': 'application/grpc',
      te: 'trailers',
      'user-agent': t.userAgent,
      'grpc-accept-encoding': 'identity',
    };
    if (deadline !== undefined) req['grpc-timeout'] = timeoutHeader(deadline);

    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let stream: ClientHttp2Stream;
    const started = Date.now();
    const finish = (err: ServiceError | null, res?: Res) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      const left = (this.active.get(s) ?? 1) - 1;
      if (left > 0) this.active.set(s, left);
      else {
        this.active.delete(s);
        if (!s.destroyed) s.unref();
      }
      cb(err, res);
    };
    const calls = this.active.get(s) ?? 0;
    if (calls === 0) s.ref();
    this.active.set(s, calls + 1);
    try {
      stream = s.request(req, { endStream: false });
    } catch (err) {
      // The session went away between ready() and now: as a dropped connection.
      this.session = undefined;
      finish(callError(GrpcStatus.UNAVAILABLE, (err as Error).message));
      return { cancel: () => undefined };
    }

    let httpStatus: number | undefined;
    let status: { code: number; details: string; metadata: Metadata } | undefined;
    const chunks: Buffer[] = [];
    let received = 0;
    let sized = false;
    let internalError: (Error & { code?: string }) | undefined;

    const trailers = (h: IncomingHttpHeaders) => {
      let metadata: Metadata;
      try {
        metadata = Metadata.fromHttp2Headers(h);
      } catch {
        metadata = new Metadata();
      }
      const sv = metadata.get('grpc-status');
      if (sv.length > 0 && typeof sv[0] === 'string') {
        let code = Number(sv[0]);
        if (!Number.isInteger(code) || !(code in GrpcStatus)) code = GrpcStatus.UNKNOWN;
        metadata.remove('grpc-status');
        let details = '';
        const mv = metadata.get('grpc-message');
        if (mv.length > 0 && typeof mv[0] === 'string') {
          details = decodeGrpcMessage(mv[0]);
          metadata.remove('grpc-message');
        }
        status = { code, details, metadata };
      } else if (httpStatus) {
        const e = httpStatusError(httpStatus);
        status = { code: e.code, details: e.details, metadata };
      } else {
        status = { code: GrpcStatus.UNKNOWN, details: 'No status received', metadata };
      }
    };

    stream.on('response', (h, flags) => {
      httpStatus = Number(h[':status']);
      if (flags & NGHTTP2_FLAG_END_STREAM) trailers(h);
      else if (h['grpc-encoding'] !== undefined && h['grpc-encoding'] !== 'identity') {
        // We offered identity only; grpc-js would fail such a response the same way.
        cancelWith(GrpcStatus.UNIMPLEMENTED, `Received message compressed with unsupported encoding "${String(h['grpc-encoding'])}"`);
      }
    });
    stream.on('trailers', trailers);
    stream.on('data', (d: Buffer) => {
      if (done) return;
      chunks.push(d);
      received += d.length;
      if (!sized && received >= 5) {
        sized = true;
        const first = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        const len = first.readUInt32BE(1);
        if (len > t.maxReceive) {
          if (httpStatus !== undefined && httpStatus !== 200) {
            const e = httpStatusError(httpStatus);
            cancelWith(e.code, e.details);
          } else cancelWith(GrpcStatus.RESOURCE_EXHAUSTED, `Received message larger than max (${len} vs ${t.maxReceive})`);
        }
      }
    });
    stream.on('error', (err: Error & { code?: string }) => {
      if (err.code !== 'ERR_HTTP2_STREAM_ERROR') internalError = err;
    });
    stream.on('close', () => {
      // A stream cut off by its session closing (the connection dropped) rather than reset.
      const dropped = s.destroyed || s.closed;
      // After any 'error' of the same moment, as grpc-js does.
      process.nextTick(() => {
        if (done) return;
        if (status) {
          if (status.code !== GrpcStatus.OK) return finish(callError(status.code, status.details, status.metadata));
          const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
          const len = body.length >= 5 ? body.readUInt32BE(1) : 0;
          // No whole message, or more than one, as grpc-js words them.
          if (body.length < 5 + len) return finish(callError(GrpcStatus.UNIMPLEMENTED, 'No message received', status.metadata));
          if (body.length > 5 + len) return finish(callError(GrpcStatus.UNIMPLEMENTED, 'Too many responses received'));
          // We offered no compression, so a server may not use any.
          if (body[0] !== 0) return finish(callError(GrpcStatus.INTERNAL, 'Received compressed message but "grpc-encoding" header was identity'));
          let res: Res;
          try {
            res = decode(body.subarray(5));
          } catch (e) {
            return finish(callError(GrpcStatus.INTERNAL, `Response message parsing error: ${(e as Error).message}`));
          }
          return finish(null, res);
        }
        finish(resetError(stream.rstCode, dropped));
      });
    });

    // grpc-js' reading of a stream that ended without a status.
    const resetError = (rst: number, dropped: boolean): ServiceError => {
      switch (rst) {
        case NGHTTP2_NO_ERROR:
          return httpStatus && httpStatus !== 200
            ? httpStatusError(httpStatus)
            : callError(GrpcStatus.INTERNAL, `Received RST_STREAM with code ${rst} (Call ended without gRPC status)`);
        case NGHTTP2_REFUSED_STREAM:
          return callError(GrpcStatus.UNAVAILABLE, 'Stream refused by server');
        case NGHTTP2_CANCEL:
          return dropped ? callError(GrpcStatus.UNAVAILABLE, 'Connection dropped') : callError(GrpcStatus.CANCELLED, 'Call cancelled');
        case NGHTTP2_ENHANCE_YOUR_CALM:
          return callError(GrpcStatus.RESOURCE_EXHAUSTED, 'Bandwidth exhausted or memory limit exceeded');
        case NGHTTP2_INADEQUATE_SECURITY:
          return callError(GrpcStatus.PERMISSION_DENIED, 'Protocol not secure enough');
        case NGHTTP2_INTERNAL_ERROR:
          if (!internalError) return callError(GrpcStatus.INTERNAL, `Received RST_STREAM with code ${rst} (Internal server error)`);
          if (internalError.code === 'ECONNRESET' || internalError.code === 'ETIMEDOUT') return callError(GrpcStatus.UNAVAILABLE, internalError.message);
          return callError(GrpcStatus.INTERNAL, `Received RST_STREAM with code ${rst} triggered by internal client error: ${internalError.message}`);
        default:
          return callError(GrpcStatus.INTERNAL, `Received RST_STREAM with code ${rst}`);
      }
    };

    // Ends the call at once with this status (the stream is reset), as grpc-js' cancelWithStatus.
    function cancelWith(code: number, details: string): void {
      if (done) return;
      finish(callError(code, details));
      if (!stream.closed) stream.close(NGHTTP2_CANCEL);
    }

    if (deadline !== undefined) {
      const ms = deadline - Date.now();
      const onDeadline = () => cancelWith(GrpcStatus.DEADLINE_EXCEEDED, `Deadline exceeded after ${((Date.now() - started) / 1000).toFixed(3)}s,remote_addr=${this.peer}`);
      // A deadline already past fires at once, as grpc-js' does on a connected channel.
      timer = setTimeout(onDeadline, Math.min(Math.max(ms, 1), 2_147_483_647));
    }

    stream.write(messagePrefix(request.length));
    stream.end(request);

    return {
      cancel: () => {
        cancelWith(GrpcStatus.CANCELLED, 'Cancelled on client');
      },
    };
  }
}
