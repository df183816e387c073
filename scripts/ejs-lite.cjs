// Stands in for `ejs` inside the oclif bundle (scripts/bundle.mjs). oclif renders every help
// text through ejs.render, which compiles each template into a new function: a few ms per help
// screen. Our templates only ever interpolate a property path (`<%= config.bin %>`), so those
// are filled in here, escaped exactly as ejs escapes `<%=` output; any other template (other
// tags, a name that is not in the data, options) goes to the real ejs, loaded only then.
'use strict';

let real;
const ejs = () => (real ??= require('ejs'));

const TAG = /<%=\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*%>/g;
const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&#34;', "'": '&#39;' };
const escapeXML = (v) => (v == undefined ? '' : String(v).replace(/[&<>'"]/g, (c) => ESCAPES[c]));
const MISSING = Symbol('missing');

function lookup(data, path) {
  const [head, ...rest] = path.split('.');
  // A name ejs would not find in the data is an error there: let ejs report it.
  if (data == null || !(head in Object(data))) return MISSING;
  let v = data[head];
  for (const k of rest) v = v == null ? MISSING : v[k];
  return v;
}

function render(template, data, options) {
  if (options !== undefined || typeof template !== 'string') return ejs().render(template, data, options);
  if (!template.includes('<%')) return template.includes('%>') ? ejs().render(template, data) : template;
  if (template.replace(TAG, '').match(/<%|%>/)) return ejs().render(template, data);
  let missing = false;
  const out = template.replace(TAG, (_, path) => {
    const v = lookup(data, path);
    if (v === MISSING) missing = true;
    return missing ? '' : escapeXML(v);
  });
  return missing ? ejs().render(template, data) : out;
}

// oclif only calls render(); the rest of the ejs API is passed through (loading ejs on use).
module.exports = {
  render,
  compile: (...args) => ejs().compile(...args),
  renderFile: (...args) => ejs().renderFile(...args),
  escapeXML: (...args) => ejs().escapeXML(...args),
};
