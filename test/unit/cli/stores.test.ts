// The commands' store opener: --file-root roots file:// stores, and a file:// store without it
// fails with the library's reason plus the flag that fixes it; other failures pass unchanged.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { openCommandStore } from '../../../src/cli/stores.js';
import { FileStore, StoreError } from '../../../src/lib/stores/index.js';

describe('openCommandStore', () => {
  test('a file:// store under --file-root', () => {
    assert.ok(openCommandStore('file:///x/', '/tmp') instanceof FileStore);
  });

  test('a file:// store without --file-root names the flag', () => {
    assert.throws(
      () => openCommandStore('file:///x/', undefined),
      (e: unknown) =>
        e instanceof StoreError &&
        e.message === "store file:///x/: no local root directory is configured for file:// stores (pass --file-root: the local directory under which file:// stores live, as the brokers' --broker.file-root)",
    );
    assert.throws(() => openCommandStore('FILE:///x/', ''), /pass --file-root/);
  });

  test('other failures are the library\'s own', () => {
    assert.throws(() => openCommandStore('gs://bucket/x/', undefined), (e: unknown) => e instanceof StoreError && !/--file-root/.test((e as Error).message));
    assert.throws(() => openCommandStore('not a url', '/tmp'), (e: unknown) => e instanceof StoreError && !/--file-root/.test((e as Error).message));
  });
});
