// Fragment stores: one interface (store.ts), one file per backend. `openStore` picks the backend
// of a store URL.
import { FileStore } from './file.js';
import { StoreError, type FragmentStore } from './store.js';

export * from './store.js';
export * from './file.js';

export interface OpenStoreOptions {
  /** Local directory rooting file:// stores. */
  fileRoot?: string;
}

/** The store for a URL of a JournalSpec's `fragment.stores`. */
export function openStore(url: string, opts: OpenStoreOptions = {}): FragmentStore {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'file':
      if (!opts.fileRoot) throw new StoreError(`store ${url}: no local root directory is configured for file:// stores`);
      return new FileStore(url, { root: opts.fileRoot });
    default:
      throw new StoreError(`store ${JSON.stringify(url)}: ${scheme ? `scheme ${scheme}:// has no backend here yet` : 'is not a URL'}`);
  }
}
