// s3rver (npm @20minutes/s3rver, pinned in node/package-lock.json), which checks SigV4
// signatures: node s3_server.js -d DIR -a HOST -p PORT --configure-bucket NAME.
// Its package ships no bin file, so its CLI module is called here.
const path = require('path');
const cli = require(path.join(__dirname, 'node', 'node_modules', '@20minutes', 's3rver', 'lib', 'cli.js'));
cli.parseAsync(['node', 's3rver', ...process.argv.slice(2)]).catch((e) => {
  console.error(e);
  process.exit(1);
});
