#!/usr/bin/env node
// `node bin/run.js ...`: gazctl, as bin/run.cjs (its entry point, which bin/gazctl runs) starts it.
import './run.cjs';
