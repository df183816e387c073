// Fragment store URLs: s3://, gs://, azure://, azure-ad:// and file:// with the query
// arguments each scheme takes.
import { fail, q } from './common.js';

const STORE_SCHEMES = new Set(['s3', 'gs', 'azure', 'azure-ad', 'file']);
const COMMON_STORE_ARGS = ['find', 'replace'];
const S3_STORE_ARGS = ['profile', 'endpoint', 'acl', 'storageclass', 'sse', 'ssekmskeyid', 'region'];

/** Problem with a fragment store URL, or undefined. */
export function checkStoreURL(store: string): string | undefined {
  if (store === '') return 'must not be empty';
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:/.test(store)) return 'is not an absolute URL';
  let url: URL;
  try {
    url = new URL(store);
  } catch {
    return 'is not a valid URL';
  }
  const scheme = url.protocol.slice(0, -1).toLowerCase();
  if (!STORE_SCHEMES.has(scheme)) {
    return `scheme ${q(scheme)} is not supported (use s3, gs, azure, azure-ad or file)`;
  }
  if (scheme === 'file') {
    if (url.host !== '') return `file:// store must not have a host (${q(url.host)}); use file:///dir/`;
  } else if (url.host === '') {
    return `${scheme}:// store needs a ${scheme === 'azure-ad' ? 'tenant' : scheme === 'azure' ? 'container' : 'bucket'}`;
  }
  const path = url.pathname;
  if (!path.endsWith('/')) return `path ${q(path)} must end in "/"`;
  if (scheme === 'azure-ad' && path.split('/').filter((s) => s !== '').length < 2) {
    return 'azure-ad:// store needs <tenant>/<account>/<container>/';
  }
  const allowed = scheme === 's3' ? [...COMMON_STORE_ARGS, ...S3_STORE_ARGS] : COMMON_STORE_ARGS;
  for (const key of url.searchParams.keys()) {
    if (!allowed.includes(key.toLowerCase())) {
      return `unknown query argument ${q(key)} (allowed: ${allowed.join(', ')})`;
    }
  }
  return undefined;
}

/** A fragment store URL (s3, gs, azure, azure-ad, file; path ending in `/`; known query args). */
export function validateFragmentStoreURL(store: string): void {
  const p = checkStoreURL(store);
  if (p) fail(p, `store ${q(store)}`);
}
