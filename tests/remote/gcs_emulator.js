// The Cloud Storage emulator of firebase-tools, started without the Firebase CLI (which
// needs Java for its rules runtime): node gcs_emulator.js HOST PORT. Prints "ready" once
// it listens. Internal modules: firebase-tools is pinned in node/package-lock.json.
const path = require('path');
const base = path.join(__dirname, 'node', 'node_modules', 'firebase-tools', 'lib', 'emulator');
const { StorageEmulator } = require(path.join(base, 'storage'));
const { EmulatorRegistry } = require(path.join(base, 'registry'));
const { createApp } = require(path.join(base, 'storage', 'server'));

const [host, port] = [process.argv[2] || '127.0.0.1', Number(process.argv[3] || 9199)];
(async () => {
  const emu = new StorageEmulator({ projectId: 'libshard-test', host, port, rules: [] });
  EmulatorRegistry.set('storage', emu); // without it every request answers 500
  const app = await createApp('libshard-test', emu);
  app.listen(port, host, () => console.log('ready'));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
