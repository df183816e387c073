// Unit tests of src/lib/message/json.ts and encoder.ts: Go's rules for the UUID field of a JSON
// message (the interop test json-messages-oracle checks the same against Go itself).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { JsonMessageError, decodeJsonMessage, encodeJsonMessage, goJsonField, goJsonKeyMatches, parseGoUUID } from '../../../../src/lib/message/json.js';
import { jsonEncoder } from '../../../../src/lib/message/encoder.js';
import { formatUUID, parseUUID } from '../../../../src/lib/message/uuid.js';

const U = '0000006e-0000-1000-8002-010000000001';

describe('JSON messages', () => {
  it('match keys to a Go field name ignoring case, with the Kelvin sign and the long s', () => {
    assert.ok(goJsonKeyMatches('uuid', 'UUID'));
    assert.ok(goJsonKeyMatches('UuId', 'UUID'));
    assert.ok(goJsonKeyMatches('\u212aey', 'key'));
    assert.ok(goJsonKeyMatches('\u017fum', 'sum'));
    assert.ok(!goJsonKeyMatches('uuids', 'UUID'));
    assert.ok(!goJsonKeyMatches('uu_id', 'UUID'));
    assert.equal(goJsonField({ uuid: 'a', UUID: 'b' }, 'UUID'), 'b', 'the last matching key wins');
    assert.equal(goJsonField({ UUID: 'b', uuid: 'a' }, 'UUID'), 'a');
    assert.equal(goJsonField({ other: 1 }, 'UUID'), undefined);
  });

  it('parse the UUID text forms google/uuid accepts', () => {
    const want = parseUUID(U);
    // 38 characters: Go drops the first and ignores the last, braces or not.
    for (const t of [U, U.toUpperCase(), `{${U}}`, `(${U})`, `{${U}x`, `urn:uuid:${U}`, `URN:UUID:${U}`, U.replace(/-/g, '')]) assert.deepEqual(parseGoUUID(t), want, t);
    for (const t of ['', U.slice(1), `${U}0`, U.replace('-', 'x'), `${U.slice(0, 35)}g`, `é${U}`, `uri:uuid:${U}`]) assert.throws(() => parseGoUUID(t), JsonMessageError, t);
  });

  it('decode a line: a missing or null UUID is the zero UUID, anything but a string fails', () => {
    assert.deepEqual(decodeJsonMessage(`{"UUID":"${U}","key":"a"}\n`).uuid, parseUUID(U));
    assert.deepEqual(decodeJsonMessage('{"key":"a","value":1}').uuid, new Uint8Array(16));
    assert.deepEqual(decodeJsonMessage('{"UUID":null}').uuid, new Uint8Array(16));
    assert.deepEqual(decodeJsonMessage(Buffer.from(`{"uuid":"{${U}}"}\r\n`)).doc, { uuid: `{${U}}` });
    assert.throws(() => decodeJsonMessage('{"UUID":12}'), /not a UUID string/);
    assert.throws(() => decodeJsonMessage('{"UUID":""}'), /invalid UUID length: 0/);
    assert.throws(() => decodeJsonMessage('[1]'), /is an object/);
    assert.throws(() => decodeJsonMessage('{"key":'), /not a JSON document/);
  });

  it('encode as Go does: UUID first, HTML-safe escapes, a newline', () => {
    const uuid = parseUUID(U);
    assert.equal(encodeJsonMessage({ key: 'a<b>&c\u2028', value: 3 }, uuid).toString(), `{"UUID":"${U}","key":"a\\u003cb\\u003e\\u0026c\\u2028","value":3}\n`);
    assert.equal(encodeJsonMessage({ value: 1, UUID: 'stale' }, uuid).toString(), `{"UUID":"${U}","value":1}\n`, 'the message\'s own UUID key is replaced');
    const enc = jsonEncoder(() => ({ key: '', value: 0 }));
    assert.equal(enc.encode(enc.newAcknowledgement('a/j'), uuid).toString(), `{"UUID":"${formatUUID(uuid)}","key":"","value":0}\n`);
  });
});
