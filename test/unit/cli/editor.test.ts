// Unit tests of the pure parts of src/cli/editor.ts (the editor loop itself runs end to end in
// test/integration/journals-edit.test.ts).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { editorCommand, stripGenerated } from '../../../src/cli/editor.js';

describe('stripGenerated', () => {
  it('drops every line starting with #⚙ or #⚠ and keeps the rest verbatim', () => {
    const text = [
      '#\u2699 Edit the specs below.',
      '#\u26a0 Your last edit failed',
      '#\u26a0',
      '#\u26a0 line 3: unknown field "bogus"',
      '#\u2699',
      'name: acme/',
      '# a user comment stays',
      '  #\u2699 indented markers are user text',
      'children:',
      '- name: acme/a',
      '',
    ].join('\n');
    assert.equal(stripGenerated(text), 'name: acme/\n# a user comment stays\n  #\u2699 indented markers are user text\nchildren:\n- name: acme/a\n');
  });

  it('normalises CRLF line endings', () => {
    assert.equal(stripGenerated('#\u2699 header\r\nname: a/b\r\nreplication: 1\r\n'), 'name: a/b\nreplication: 1\n');
  });

  it('leaves only whitespace for a file of generated lines', () => {
    assert.equal(stripGenerated('#\u2699 a\n#\u26a0 b\n#\u2699\n').trim(), '');
  });

  it('is idempotent', () => {
    const once = stripGenerated('#\u2699 x\nname: a/b\n#\u26a0 y\nrevision: 3\n');
    assert.equal(stripGenerated(once), once);
  });
});

describe('editorCommand', () => {
  it('prefers $GAZ_EDITOR, then $EDITOR, then vi', () => {
    assert.equal(editorCommand({ GAZ_EDITOR: 'nano -w', EDITOR: 'emacs' }), 'nano -w');
    assert.equal(editorCommand({ EDITOR: 'emacs' }), 'emacs');
    assert.equal(editorCommand({ GAZ_EDITOR: '', EDITOR: 'emacs' }), 'emacs');
    assert.equal(editorCommand({}), 'vi');
  });
});
