'use strict';
// fsafe for Node: crash-safe file persistence over libfsafe.
module.exports = {
  ...require('./write'),
  ...require('./sweep'),
  ...require('./writer'),
  ...require('./lock'),
  ...require('./store'),
  ...require('./spool'),
  ...require('./inbox'),
  ...require('./checkpoint'),
};
