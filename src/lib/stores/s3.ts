// The s3:// fragment store, on the AWS SDK v3. Store `s3://<bucket>/<prefix>/?args` keeps path
// `p` at key `<prefix>/<p>` of the bucket (after the optional find/replace rewrite). Query
// arguments, names matched case-insensitively as Go's form decoder does, first value winning:
//
//   endpoint      an S3-compatible server (`http://host:port`; a bare `host:port` means https).
//                 Naming one switches to path-style requests (`<endpoint>/<bucket>/<key>`),
//                 since bucket-named virtual hosts don't exist on such servers. The value may
//                 be URL-encoded.
//   region        the bucket's region; else the SDK's (AWS_REGION, the profile's config).
//   profile       the shared config/credentials profile to take credentials and region from;
//                 else the SDK's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
//                 AWS_PROFILE, ~/.aws files, container and instance credentials).
//   acl, storageclass, sse, ssekmskeyid
//                 passed on every put as the object's canned ACL, storage class, server-side
//                 encryption and KMS key, when given (nothing is sent when absent).
//   find, replace the path rewrite every scheme takes.
//
// Failures are StoreErrors with one line naming the store: StoreAuthError for refused
// credentials, missing permissions and a missing bucket (isAuthError is true for those),
// StoreUnreachableError when the endpoint cannot be reached, StoreNotFoundError for a missing
// object. Requests time out on connect after a few seconds and are retried only a few times, so
// a wrong endpoint fails in seconds rather than minutes.
import { pipeline, Readable, Transform, type TransformCallback } from 'node:stream';

import { createRequire } from 'node:module';

import { socksAgent, socksServer, type SocksServer } from '../socks.js';
import type { ObjectCannedACL, PutObjectCommandInput, S3Client, ServerSideEncryption, StorageClass } from '@aws-sdk/client-s3';

import type * as Sdk from './s3-sdk.cjs';

import { checkStoreURL } from '../protocol/validate/store-url.js';
import {
  StoreAuthError,
  StoreError,
  StoreNotFoundError,
  StoreUnreachableError,
  checkStoreHealth,
  parseFragmentListing,
  rewriteArgs,
  rewritePath,
  type FragmentListing,
  type FragmentStore,
  type HealthOptions,
  type OpenOptions,
  type PutContent,
  type PutOptions,
  type StoreObject,
} from './store.js';

/** Static credentials, taking the place of the SDK's default chain. */
export interface S3StaticCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface S3StoreOptions {
  /** Credentials to use instead of the default chain (and of the URL's `profile`). */
  credentials?: S3StaticCredentials;
  /** Region when the URL names none (before the SDK's own sources). */
  region?: string;
  /** TCP connect timeout per attempt. Default 5 s. */
  connectTimeoutMs?: number;
  /** Attempts per request, the first included. Default 3. */
  maxAttempts?: number;
  /** Part size for puts of unknown length (at least 5 MiB, S3's minimum). Default 8 MiB. */
  partSize?: number;
  /** SOCKS5 proxy for the store's requests; default: the process's (`setSocksServer`), if any. */
  socksServer?: SocksServer;
}

/** The parsed form of an s3:// store URL. */
export interface S3StoreURL {
  bucket: string;
  /** Key prefix: the URL path without its leading `/`; ends in `/` or is empty. */
  prefix: string;
  find: string;
  replace: string;
  /** Normalized endpoint URL (`http(s)://host[:port][/path]`), when one is given. */
  endpoint?: string;
  region?: string;
  profile?: string;
  acl?: string;
  storageClass?: string;
  sse?: string;
  sseKmsKeyId?: string;
}

const S3_ARGS: Record<string, keyof S3StoreURL> = {
  endpoint: 'endpoint',
  region: 'region',
  profile: 'profile',
  acl: 'acl',
  storageclass: 'storageClass',
  sse: 'sse',
  ssekmskeyid: 'sseKmsKeyId',
};

/** Parse and check an s3:// store URL; a StoreError names the problem. */
export function parseS3StoreURL(url: string): S3StoreURL {
  const problem = checkStoreURL(url);
  if (problem) throw new StoreError(`store ${JSON.stringify(url)}: ${problem}`);
  const u = new URL(url);
  if (u.protocol !== 's3:') throw new StoreError(`store ${JSON.stringify(url)} is not an s3:// store`);
  const out: S3StoreURL = { bucket: decodeURIComponent(u.host), prefix: decodeURIComponent(u.pathname).slice(1), ...rewriteArgs(u) };
  const seen = new Set<string>();
  for (const [k, v] of u.searchParams) {
    const field = S3_ARGS[k.toLowerCase()];
    if (field === undefined || seen.has(field)) continue;
    seen.add(field);
    if (v !== '') (out as unknown as Record<string, string>)[field] = v;
  }
  if (out.endpoint !== undefined) out.endpoint = normalizeEndpoint(url, out.endpoint);
  return out;
}

function normalizeEndpoint(store: string, raw: string): string {
  let v = raw.trim();
  // Accept an endpoint that was URL-encoded once more than the query needs (`http%3A%2F%2F…`
  // arriving as `http%3A…` after decoding).
  if (/^https?%3A/i.test(v)) {
    try {
      v = decodeURIComponent(v);
    } catch {
      // leave it; the check below reports it
    }
  }
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(v)) v = `https://${v}`; // like the Go SDK: no scheme means https
  let e: URL;
  try {
    e = new URL(v);
  } catch {
    throw new StoreError(`store ${store}: endpoint ${JSON.stringify(raw)} is not a URL`);
  }
  if (e.protocol !== 'http:' && e.protocol !== 'https:') {
    throw new StoreError(`store ${store}: endpoint ${JSON.stringify(raw)} must be an http:// or https:// URL`);
  }
  if (e.search !== '' || e.hash !== '') throw new StoreError(`store ${store}: endpoint ${JSON.stringify(raw)} must not have a query`);
  return e.href.replace(/\/$/, '');
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

const MIN_PART = 5 * 1024 * 1024;

const QUIET = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/**
 * The AWS SDK (./s3-sdk.cts), required on first use: a program that never makes an S3Store
 * never loads it. In the CLI bundle, `import.meta.url` is the bundle file's URL and
 * `./s3-sdk.cjs` the bundle file holding the SDK, loaded with its code cache (see
 * scripts/bundle.mjs). Synchronous, so that opening a store stays synchronous.
 */
let sdkModule: typeof Sdk | undefined;
function loadS3Sdk(): typeof Sdk {
  return (sdkModule ??= createRequire(import.meta.url)('./s3-sdk.cjs') as typeof Sdk);
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EPIPE',
]);

/** Errors passed through `fail` unchanged: already one of ours. */
function isOurs(e: unknown): e is StoreError {
  return e instanceof StoreError;
}

export class S3Store implements FragmentStore {
  readonly scheme = 's3';
  readonly bucket: string;
  /** Key prefix of the store in the bucket. */
  readonly prefix: string;
  readonly args: Readonly<S3StoreURL>;
  readonly client: S3Client;
  private readonly partSize: number;
  /** The SDK's classes and functions (loaded by the first S3Store). */
  private readonly sdk: typeof Sdk = loadS3Sdk();

  constructor(
    readonly url: string,
    opts: S3StoreOptions = {},
  ) {
    this.args = parseS3StoreURL(url);
    this.bucket = this.args.bucket;
    this.prefix = this.args.prefix;
    this.partSize = Math.max(MIN_PART, opts.partSize ?? 8 * 1024 * 1024);
    const region = this.args.region ?? opts.region;
    // The SDK prints a notice about future Node.js support when a client is made on Node 20,
    // which this package supports; keep stderr for what the user needs to act on.
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const socks = opts.socksServer ?? socksServer();
    this.client = new this.sdk.S3Client({
      ...(region ? { region } : {}),
      ...(this.args.endpoint ? { endpoint: this.args.endpoint, forcePathStyle: true } : {}),
      ...(this.args.profile && !opts.credentials ? { profile: this.args.profile } : {}),
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      maxAttempts: opts.maxAttempts ?? 3,
      requestHandler: {
        connectionTimeout: opts.connectTimeoutMs ?? 5000,
        // Through a SOCKS proxy when one is set: the endpoint's name is resolved by the proxy.
        ...(socks ? { httpAgent: socksAgent(socks, false), httpsAgent: socksAgent(socks, true) } : {}),
      },
      // Checksums only where S3 requires them: S3-compatible servers vary in what they accept,
      // and fragment content is checked by its SHA-1 sum anyway.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // Failures reach the caller as StoreErrors; the SDK should not print warnings of its own.
      logger: QUIET,
    });
  }

  /** The bucket key of store path `path`. */
  key(path: string): string {
    return rewritePath(this.prefix, path, this.args.find, this.args.replace);
  }

  /** Release the client's sockets. */
  close(): void {
    this.client.destroy();
  }

  /** Turn an SDK or network failure into a one-line StoreError naming the store. */
  private fail(op: string, path: string, e: unknown): StoreError {
    if (isOurs(e)) return e;
    const where = `store ${this.url}: ${op} ${path}`;
    if (e instanceof this.sdk.S3ServiceException) {
      const status = e.$metadata?.httpStatusCode;
      const code = e.name;
      switch (code) {
        case 'SignatureDoesNotMatch':
        case 'InvalidAccessKeyId':
        case 'InvalidToken':
        case 'ExpiredToken':
        case 'TokenRefreshRequired':
        case 'XAdminUserNotFound': // versitygw's answer (HTTP 404) for an unknown access key
          return new StoreAuthError(`${where}: credentials refused (${code})`, 'credentials', { cause: e });
        case 'AccessDenied':
        case 'AllAccessDisabled':
          return new StoreAuthError(`${where}: access denied (${code})`, 'denied', { cause: e });
        case 'NoSuchBucket':
          return new StoreAuthError(`${where}: bucket ${this.bucket} does not exist (NoSuchBucket)`, 'no-bucket', { cause: e });
        case 'NoSuchKey':
          return new StoreNotFoundError(`${where}: no such object (NoSuchKey)`, { cause: e });
      }
      if (status === 403) return new StoreAuthError(`${where}: access denied (HTTP 403${code && code !== 'Unknown' ? ` ${code}` : ''})`, 'denied', { cause: e });
      if (status === 404) return new StoreNotFoundError(`${where}: not found (HTTP 404)`, { cause: e });
      const text = firstLine(e.message);
      return new StoreError(`${where}: ${code}${status ? ` (HTTP ${status})` : ''}${text && text !== code ? `: ${text}` : ''}`, { cause: e });
    }
    const err = e as (Error & { code?: string; name?: string; errors?: unknown[] }) | undefined;
    const code = err?.code ?? (err?.errors?.[0] as { code?: string } | undefined)?.code;
    if ((code && NETWORK_CODES.has(code)) || err?.name === 'TimeoutError') {
      const endpoint = this.args.endpoint ?? 'the S3 service';
      const why = code ?? 'connection timed out';
      return new StoreUnreachableError(`${where}: cannot reach ${endpoint} (${why})`, { cause: e });
    }
    if (err?.name === 'CredentialsProviderError') {
      const hint = this.args.profile
        ? `for profile ${this.args.profile} (is it in the shared credentials or config file?)`
        : 'found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or profile= in the store URL)';
      return new StoreAuthError(`${where}: no AWS credentials ${hint}`, 'credentials', { cause: e });
    }
    if (err instanceof Error && /region is missing/i.test(err.message)) {
      return new StoreError(`${where}: no AWS region (add region=… to the store URL, or set AWS_REGION)`, { cause: e });
    }
    if (err?.name === 'AbortError') return new StoreError(`${where}: aborted`, { cause: e });
    return new StoreError(`${where}: ${firstLine(err instanceof Error ? err.message : String(e))}`, { cause: e });
  }

  async *list(prefix: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<StoreObject, void, undefined> {
    const keyPrefix = this.key(prefix);
    const pages = this.sdk.paginateListObjectsV2(
      { client: this.client, pageSize: 1000 },
      { Bucket: this.bucket, Prefix: keyPrefix },
    );
    const it = pages[Symbol.asyncIterator]();
    for (;;) {
      if (opts.signal?.aborted) throw abortError(opts.signal);
      let page;
      try {
        page = await it.next();
      } catch (e) {
        throw this.fail('list', prefix, e);
      }
      if (page.done) return;
      for (const o of page.value.Contents ?? []) {
        const key = o.Key ?? '';
        if (key.endsWith('/') || !key.startsWith(keyPrefix)) continue; // directory markers
        yield { path: key.slice(keyPrefix.length), modTime: o.LastModified ?? new Date(0), size: o.Size ?? 0 };
      }
    }
  }

  listFragments(journal: string, opts: { signal?: AbortSignal } = {}): AsyncIterable<FragmentListing> {
    return parseFragmentListing(this.url, journal, this.list(journal + '/', opts));
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.client.send(new this.sdk.HeadObjectCommand({ Bucket: this.bucket, Key: this.key(path) }));
      return true;
    } catch (e) {
      const f = this.fail('stat', path, e);
      if (f instanceof StoreNotFoundError) return false;
      throw f;
    }
  }

  async open(path: string, opts: OpenOptions = {}): Promise<Readable> {
    const start = opts.start ?? 0;
    if (!Number.isSafeInteger(start) || start < 0) throw new StoreError(`store ${this.url}: open ${path}: bad start ${start}`);
    if (opts.end !== undefined && (!Number.isSafeInteger(opts.end) || opts.end < 0)) {
      throw new StoreError(`store ${this.url}: open ${path}: bad end ${opts.end}`);
    }
    if (opts.signal?.aborted) throw abortError(opts.signal);
    if (opts.end !== undefined && opts.end <= start) {
      // Nothing to read, but a missing object still fails as it would with a range.
      if (!(await this.exists(path))) throw new StoreNotFoundError(`store ${this.url}: open ${path}: no such object`);
      return Readable.from([]);
    }
    const range = start === 0 && opts.end === undefined ? undefined : `bytes=${start}-${opts.end === undefined ? '' : opts.end - 1}`;
    try {
      const res = await this.client.send(new this.sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.key(path), Range: range }), {
        abortSignal: opts.signal,
      });
      const body = res.Body as Readable | undefined;
      return body ?? Readable.from([]);
    } catch (e) {
      // A range starting at or past the end reads nothing, as a file read does.
      if (e instanceof this.sdk.S3ServiceException && (e.$metadata?.httpStatusCode === 416 || e.name === 'InvalidRange')) {
        return Readable.from([]);
      }
      throw this.fail('open', path, e);
    }
  }

  async get(path: string, opts: OpenOptions = {}): Promise<Buffer> {
    const stream = await this.open(path, opts);
    const parts: Buffer[] = [];
    try {
      for await (const c of stream) parts.push(c as Buffer);
    } catch (e) {
      throw this.fail('read', path, e);
    }
    return Buffer.concat(parts);
  }

  private putInput(path: string, opts: PutOptions): PutObjectCommandInput {
    const a = this.args;
    return {
      Bucket: this.bucket,
      Key: this.key(path),
      ...(a.acl ? { ACL: a.acl as ObjectCannedACL } : {}),
      ...(a.storageClass ? { StorageClass: a.storageClass as StorageClass } : {}),
      ...(a.sse ? { ServerSideEncryption: a.sse as ServerSideEncryption } : {}),
      ...(a.sseKmsKeyId ? { SSEKMSKeyId: a.sseKmsKeyId } : {}),
      ...(opts.contentEncoding ? { ContentEncoding: opts.contentEncoding } : {}),
    };
  }

  async put(path: string, content: PutContent, opts: PutOptions = {}): Promise<void> {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const send = { abortSignal: opts.signal };
    try {
      if (typeof content === 'string' || content instanceof Uint8Array) {
        const body = typeof content === 'string' ? Buffer.from(content) : content;
        if (opts.contentLength !== undefined && body.length !== opts.contentLength) {
          throw new StoreError(`store ${this.url}: put ${path}: content has ${body.length} bytes, expected ${opts.contentLength}`);
        }
        await this.client.send(new this.sdk.PutObjectCommand({ ...this.putInput(path, opts), Body: body, ContentLength: body.length }), send);
        return;
      }
      if (opts.contentLength !== undefined) {
        // Known length: stream the body in one request. The length check fails the request
        // mid-body when the content runs long or short, so no object is created.
        // A failed check aborts the request, so the server never completes the object.
        // A content stream that fails partway aborts the request too, and the put fails with its
        // error. (Piped rather than pipelined, its failure had no listener: an uncaught exception,
        // and a request left waiting for the rest of its body.)
        const abort = new AbortController();
        const check = new LengthCheck(opts.contentLength, `store ${this.url}: put ${path}`, (err) => abort.abort(err));
        const source = Readable.from(content as AsyncIterable<Uint8Array>);
        let sourceError: Error | undefined;
        source.once('error', (e) => {
          sourceError = e;
          abort.abort(e);
        });
        const body = pipeline(source, check, () => undefined); // failures are kept as above
        try {
          await this.client.send(
            new this.sdk.PutObjectCommand({ ...this.putInput(path, opts), Body: body, ContentLength: opts.contentLength }),
            { abortSignal: opts.signal ? AbortSignal.any([opts.signal, abort.signal]) : abort.signal },
          );
        } catch (e) {
          throw check.error ?? sourceError ?? e;
        }
        if (check.error) throw check.error;
        if (sourceError) throw sourceError;
        return;
      }
      await this.putUnknownLength(path, content, opts);
    } catch (e) {
      throw this.fail('put', path, e);
    }
  }

  /**
   * A put of unknown length: the first part is buffered; content that fits in it is sent in one
   * request, anything longer becomes a multipart upload of `partSize` parts (aborted on error,
   * so nothing is left behind).
   */
  private async putUnknownLength(path: string, content: AsyncIterable<Uint8Array | string>, opts: PutOptions): Promise<void> {
    const send = { abortSignal: opts.signal };
    let buf: Buffer[] = [];
    let n = 0;
    let uploadId: string | undefined;
    const parts: { ETag: string; PartNumber: number }[] = [];
    const flushPart = async (): Promise<void> => {
      const body = Buffer.concat(buf);
      buf = [];
      n = 0;
      if (uploadId === undefined) {
        const created = await this.client.send(new this.sdk.CreateMultipartUploadCommand(this.putInput(path, opts)), send);
        uploadId = created.UploadId;
        if (!uploadId) throw new StoreError(`store ${this.url}: put ${path}: the server returned no upload id`);
      }
      const PartNumber = parts.length + 1;
      const res = await this.client.send(
        new this.sdk.UploadPartCommand({ Bucket: this.bucket, Key: this.key(path), UploadId: uploadId, PartNumber, Body: body, ContentLength: body.length }),
        send,
      );
      parts.push({ ETag: res.ETag ?? '', PartNumber });
    };
    try {
      for await (const c of content) {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        const b = typeof c === 'string' ? Buffer.from(c) : Buffer.from(c.buffer, c.byteOffset, c.byteLength);
        buf.push(b);
        n += b.length;
        if (n >= this.partSize) await flushPart();
      }
      if (uploadId === undefined) {
        const body = Buffer.concat(buf);
        await this.client.send(new this.sdk.PutObjectCommand({ ...this.putInput(path, opts), Body: body, ContentLength: body.length }), send);
        return;
      }
      if (n > 0) await flushPart();
      await this.client.send(
        new this.sdk.CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: this.key(path), UploadId: uploadId, MultipartUpload: { Parts: parts } }),
        send,
      );
    } catch (e) {
      if (uploadId !== undefined) {
        await this.client
          .send(new this.sdk.AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key(path), UploadId: uploadId }))
          .catch(() => undefined);
      }
      throw e;
    }
  }

  async remove(path: string): Promise<void> {
    // S3's DELETE succeeds for a missing key; check first so a missing object is reported as
    // it is by the file backend. (A concurrent removal between the two is not an error.)
    if (!(await this.exists(path))) throw new StoreNotFoundError(`store ${this.url}: remove ${path}: no such object`);
    try {
      await this.client.send(new this.sdk.DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(path) }));
    } catch (e) {
      throw this.fail('remove', path, e);
    }
  }

  /** A presigned GET URL of the object, valid for `ttlMs` (rounded up to whole seconds). */
  async signGet(path: string, ttlMs: number): Promise<string> {
    try {
      return await this.sdk.getSignedUrl(this.client, new this.sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.key(path) }), {
        expiresIn: Math.max(1, Math.ceil(ttlMs / 1000)),
      });
    } catch (e) {
      throw this.fail('sign', path, e);
    }
  }

  health(opts: HealthOptions = {}): Promise<void> {
    return checkStoreHealth(this, opts);
  }

  /** True for refused credentials, missing permissions (any HTTP 403) and a missing bucket. */
  isAuthError(err: unknown): boolean {
    for (let e = err; e; e = (e as { cause?: unknown }).cause) {
      if (e instanceof StoreAuthError) return true;
      if (e instanceof this.sdk.S3ServiceException) {
        if (e.name === 'NoSuchBucket' || e.name === 'AccessDenied' || e.$metadata?.httpStatusCode === 403) return true;
      }
      if (!(e instanceof Error)) break;
    }
    return false;
  }
}

function firstLine(s: string): string {
  return (s.split('\n')[0] ?? '').trim();
}

/** Passes bytes through, failing when their count ends up other than `want`. */
class LengthCheck extends Transform {
  private n = 0;
  error: StoreError | undefined;

  constructor(
    private readonly want: number,
    private readonly what: string,
    private readonly onError: (e: StoreError) => void,
  ) {
    super();
  }

  private failWith(cb: TransformCallback, msg: string): void {
    this.error = new StoreError(`${this.what}: ${msg}`);
    this.onError(this.error);
    cb(this.error);
  }

  override _transform(chunk: Buffer | string, _enc: BufferEncoding, cb: TransformCallback): void {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.n += b.length;
    if (this.n > this.want) return this.failWith(cb, `content has more than ${this.want} bytes`);
    cb(null, b);
  }

  override _flush(cb: TransformCallback): void {
    if (this.n !== this.want) return this.failWith(cb, `content has ${this.n} bytes, expected ${this.want}`);
    cb();
  }
}
