// The file:// backend against the shared store conformance table.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';

import { FileStore, openFileURL } from '../../../../src/lib/stores/index.js';
import { storeConformance, type StoreFixture } from './conformance.js';

describe('file:// store conformance', () => {
  let root = '';
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gazctl-fileconf-'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const fixture: StoreFixture = {
    async open(name, query) {
      mkdirSync(join(root, name), { recursive: true });
      return new FileStore(`file:///${name}/${query ? `?${query}` : ''}`, { root });
    },
    async raw(key) {
      try {
        return readFileSync(join(root, key));
      } catch {
        return undefined;
      }
    },
    async readSigned(url) {
      const parts: Buffer[] = [];
      for await (const c of await openFileURL(root, url)) parts.push(c as Buffer);
      return Buffer.concat(parts);
    },
  };
  storeConformance(() => fixture);
});
