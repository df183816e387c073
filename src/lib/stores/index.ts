// Fragment stores: one interface (store.ts), one file per backend. `openStore` picks the backend
// of a store URL.
import { FileStore } from './file.js';
import { S3Store, type S3StoreOptions } from './s3.js';
import { StoreError, type FragmentStore } from './store.js';

export * from './store.js';
export * from './file.js';
export * from './s3.js';

export interface OpenStoreOptions {
  /** Local directory rooting file:// stores. */
  fileRoot?: string;
  /**
   * Options of s3:// stores: explicit credentials, timeouts. Without credentials the AWS SDK's
   * default chain applies (environment, the URL's `profile` or AWS_PROFILE, ~/.aws files).
   */
  s3?: S3StoreOptions;
}

/** The store for a URL of a JournalSpec's `fragment.stores`. */
export function openStore(url: string, opts: OpenStoreOptions = {}): FragmentStore {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'file':
      if (!opts.fileRoot) throw new StoreError(`store ${url}: no local root directory is configured for file:// stores`);
      return new FileStore(url, { root: opts.fileRoot });
    case 's3':
      return new S3Store(url, opts.s3);
    default:
      throw new StoreError(`store ${JSON.stringify(url)}: ${scheme ? `scheme ${scheme}:// has no backend here yet` : 'is not a URL'}`);
  }
}
