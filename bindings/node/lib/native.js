'use strict';
// The compiled addon: FSAFE_NODE_ADDON names a build's fsafe.node (the
// project's CMake build sets it for the tests); otherwise node-gyp's.
const path = require('node:path');

const addon = process.env.FSAFE_NODE_ADDON;
module.exports = require(addon ? path.resolve(addon) :
  path.join(__dirname, '..', 'build', 'Release', 'fsafe.node'));
