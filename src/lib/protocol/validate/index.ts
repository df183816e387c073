// Validation of names, URLs, specs, routes, headers and Apply requests, one module per subject.
// Every failure throws a ValidationError whose message is one line naming the subject, the field
// and the bad value.
export * from './names.js';
export * from './store-url.js';
export * from './go-template.js';
export * from './specs.js';
export * from './requests.js';
