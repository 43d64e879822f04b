// The S3 emulator of the remote tests: @20minutes/s3rver (it checks SigV4 signatures), installed
// by npm ci into the build tree (tests/remote/CMakeLists.txt). Binds 127.0.0.1 on a free port
// with the bucket sluice-test, keys S3RVER/S3RVER, objects under DIR; prints the port and exits
// when its standard input closes (the test's end, however it ends).
// usage: node s3_server.js NODE_MODULES DIR
'use strict';
const path = require('path');
const S3rver = require(path.join(process.argv[2], '@20minutes/s3rver'));

const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory: process.argv[3],
  configureBuckets: [{ name: 'sluice-test' }],
});
server.run().then((addr) => {
  process.stdout.write(`${addr.port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
