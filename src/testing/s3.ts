// A throw-away S3 server for tests: versitygw with its posix backend (each top-level directory
// of the data dir is a bucket, objects are files below it) on a free loopback port, one root
// access key and secret, and one bucket created at start. It checks AWS Signature V4 on every
// request, so clients must sign as they would against AWS.
//
// Gazette store URLs reach it path-style through the `endpoint` query argument:
//   s3://<bucket>/<prefix>/?endpoint=http://127.0.0.1:<port>&region=us-east-1
//
// `s3Request` is a minimal SigV4 signer over fetch, enough for tests to seed and inspect the
// bucket (and for the harness to create it).

import { createHash, createHmac, randomBytes } from 'node:crypto';
import { accessSync, constants, rmSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { peersBinDir } from './peers.js';
import { freePort } from './ports.js';
import { PollAbort, pollUntil, registerExitCleanup, scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

export interface StartS3Options {
  /** Directory for the posix root and the log; a fresh temp dir (removed on stop) when absent. */
  dir?: string;
  /** Bucket created at start. Default `gazette-test`. */
  bucket?: string;
  /** Root credentials. Defaults: a random access key and secret, region us-east-1. */
  credentials?: Partial<S3Credentials>;
  /** Listen port; a free one when absent. */
  port?: number;
  /** How long to wait for the health endpoint. Default 20 s. */
  readyTimeoutMs?: number;
  /**
   * Serve https with this certificate and key (PEM files); `ca` is the PEM the harness trusts
   * for its own requests. The certificate must name 127.0.0.1.
   */
  tls?: { certFile: string; keyFile: string; ca: string | Buffer };
}

export interface S3Server {
  /** `http://127.0.0.1:<port>` (https with `tls`) */
  readonly endpoint: string;
  readonly port: number;
  readonly bucket: string;
  readonly credentials: S3Credentials;
  /** The posix backend root: `<dataDir>/<bucket>/<key>` is the file of an object. */
  readonly dataDir: string;
  readonly logFile: string;
  readonly process: ManagedProcess;
  /** A Gazette store URL for `prefix` (which must end in `/`, or be empty) in the bucket. */
  storeUrl(prefix?: string): string;
  /** SIGTERM (then SIGKILL) and wait; removes the dir when it was created by startS3. */
  stop(): Promise<void>;
}

const HEALTH_PATH = '/health';

/** Path of the versitygw binary that `scripts/install-peers.sh` builds. */
export function versitygwBinary(): string {
  const bin = join(peersBinDir(), 'versitygw');
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    throw new Error(
      `test S3 server 'versitygw' not found at ${bin}; build the peers with \`scripts/install-peers.sh\` ` +
        `(set GAZCTL_PEERS_DIR to use another location than ~/.cache/gazctl-peers)`,
    );
  }
  return bin;
}

/** True when the versitygw binary has been built. */
export function haveS3Server(): boolean {
  try {
    versitygwBinary();
    return true;
  } catch {
    return false;
  }
}

/** Start versitygw, wait until it answers, and create the bucket. */
export async function startS3(opts: StartS3Options = {}): Promise<S3Server> {
  const bin = versitygwBinary();
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'gazctl-s3-')));
  const unregister = ownDir ? registerExitCleanup(() => rmSync(dir, { recursive: true, force: true })) : () => {};
  const dataDir = join(dir, 'root');
  await mkdir(dataDir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const endpoint = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  const ca = opts.tls?.ca;
  const bucket = opts.bucket ?? 'gazette-test';
  const credentials: S3Credentials = {
    accessKeyId: opts.credentials?.accessKeyId ?? `test${randomBytes(6).toString('hex')}`,
    secretAccessKey: opts.credentials?.secretAccessKey ?? randomBytes(18).toString('base64url'),
    region: opts.credentials?.region ?? 'us-east-1',
  };
  const logFile = join(dir, 'versitygw.log');

  // versitygw reads VGW_* and ROOT_* variables as flags; keep the developer's out and pass the
  // credentials through its environment (not argv, where `ps` would show them).
  const env = scrubEnv(process.env, ['VGW_', 'ROOT_ACCESS_KEY', 'ROOT_SECRET', 'LOGFILE', 'WEBHOOK']);
  env.ROOT_ACCESS_KEY_ID = credentials.accessKeyId;
  env.ROOT_SECRET_ACCESS_KEY = credentials.secretAccessKey;
  const proc = spawnManaged({
    name: 'versitygw',
    command: bin,
    args: [
      `--port=127.0.0.1:${port}`,
      `--region=${credentials.region}`,
      `--health=${HEALTH_PATH}`,
      ...(opts.tls ? [`--cert=${opts.tls.certFile}`, `--key=${opts.tls.keyFile}`] : []),
      '--quiet',
      'posix',
      dataDir,
    ],
    logFile,
    env,
  });

  const stop = async (): Promise<void> => {
    await proc.stop('SIGTERM', 5000);
    if (ownDir) {
      await rm(dir, { recursive: true, force: true });
      unregister();
    }
  };

  try {
    await pollUntil(
      `versitygw at ${endpoint} to answer`,
      async () => {
        if (!proc.running) throw new PollAbort('versitygw exited');
        try {
          const res = await httpGet(`${endpoint}${HEALTH_PATH}`, ca);
          await res.arrayBuffer();
          return res.ok;
        } catch {
          return false;
        }
      },
      { timeoutMs: opts.readyTimeoutMs ?? 20_000, intervalMs: 50, describe: () => proc.describe() },
    );
    const res = await s3Request({ endpoint, credentials, method: 'PUT', path: `/${bucket}`, ca });
    if (res.status !== 200) {
      throw new Error(`creating bucket ${bucket}: HTTP ${res.status}: ${await res.text()}\n${proc.describe()}`);
    }
    await res.arrayBuffer();
  } catch (e) {
    await stop();
    throw e;
  }

  const storeUrl = (prefix = ''): string => {
    if (prefix !== '' && !prefix.endsWith('/')) throw new Error(`store prefix ${JSON.stringify(prefix)} must end in '/'`);
    return `s3://${bucket}/${prefix}?endpoint=${encodeURIComponent(endpoint)}&region=${credentials.region}`;
  };
  return { endpoint, port, bucket, credentials, dataDir, logFile, process: proc, storeUrl, stop };
}

// ---- SigV4 ----------------------------------------------------------------------------------

export interface S3RequestOptions {
  endpoint: string;
  credentials: S3Credentials;
  method: string;
  /** Path-style: `/<bucket>` or `/<bucket>/<key>` (unencoded; segments are encoded here). */
  path: string;
  /** Query parameters (unencoded). */
  query?: Record<string, string>;
  body?: Uint8Array | string;
  headers?: Record<string, string>;
  /** Signing time (default now). */
  date?: Date;
  /** For an https endpoint: the only CA trusted (fetch cannot be given one). */
  ca?: string | Buffer;
}

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const sha256Hex = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');
const hmac = (key: Uint8Array | string, data: string): Buffer => createHmac('sha256', key).update(data).digest();

/** Send one SigV4-signed request (service `s3`, payload hashed) and return the response. */
export async function s3Request(opts: S3RequestOptions): Promise<Response> {
  const url = new URL(opts.endpoint);
  const body = opts.body === undefined ? new Uint8Array() : typeof opts.body === 'string' ? Buffer.from(opts.body) : opts.body;
  const date = opts.date ?? new Date();
  const amzDate = date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, ''); // YYYYMMDDTHHMMSSZ
  const day = amzDate.slice(0, 8);
  const payloadHash = sha256Hex(body);

  const canonicalPath = opts.path.split('/').map(uriEncode).join('/');
  const query = Object.entries(opts.query ?? {})
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');

  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = v.trim();
  headers.host = url.host;
  headers['x-amz-date'] = amzDate;
  headers['x-amz-content-sha256'] = payloadHash;
  const names = Object.keys(headers).sort();
  const canonicalHeaders = names.map((n) => `${n}:${headers[n]}\n`).join('');
  const signedHeaders = names.join(';');

  const canonicalRequest = [opts.method, canonicalPath, query, canonicalHeaders, signedHeaders, payloadHash].join('\n');
  const scope = `${day}/${opts.credentials.region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  let key = hmac(`AWS4${opts.credentials.secretAccessKey}`, day);
  key = hmac(key, opts.credentials.region);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  headers.authorization =
    `AWS4-HMAC-SHA256 Credential=${opts.credentials.accessKeyId}/${scope}, ` +
    `SignedHeaders=${signedHeaders}, Signature=${signature}`;
  delete headers.host; // fetch sets it from the URL

  const target = `${url.origin}${canonicalPath}${query ? `?${query}` : ''}`;
  if (opts.ca !== undefined) return httpsFetch(target, opts.method, headers, body, opts.ca);
  return fetch(target, {
    method: opts.method,
    headers,
    body: body.length > 0 ? body : undefined,
    signal: AbortSignal.timeout(10_000),
  });
}

/** A GET of `url` (through fetch, or over https trusting only `ca` when given). */
function httpGet(url: string, ca: string | Buffer | undefined): Promise<Response> {
  if (ca !== undefined) return httpsFetch(url, 'GET', {}, new Uint8Array(), ca);
  return fetch(url, { signal: AbortSignal.timeout(2000) });
}

/** One https request trusting only `ca`, answered as a fetch Response. */
function httpsFetch(url: string, method: string, headers: Record<string, string>, body: Uint8Array, ca: string | Buffer): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { method, headers, ca, timeout: 10_000 }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve(new Response(res.statusCode === 204 || res.statusCode === 304 ? null : Buffer.concat(parts), { status: res.statusCode ?? 0, headers: h }));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: timed out`)));
    req.on('error', reject);
    req.end(body.length > 0 ? body : undefined);
  });
}
