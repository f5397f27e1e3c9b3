// tests/viewer/web.js URL PNG [SECONDS] - the web viewer in headless
// Chromium, driven as a person's browser would run it: loads URL (a page
// served on localhost), prints every console message and page error as it
// comes, waits (up to SECONDS, default 120) for the viewer's closing line
// ("viewer: N frames of ...", index.html?frames=N), then saves a
// screenshot of the page as PNG. Exit status 0 when the closing line says
// ok and no error reached the console; 1 otherwise; 2 when Chromium
// cannot be started at all. Speaks the DevTools protocol over a pipe
// (--remote-debugging-pipe: file descriptors 3 and 4, JSON messages ended
// by a NUL byte), so it needs Node and Chromium only.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [url, png, seconds] = process.argv.slice(2);
if (!url || !png) {
  console.error('usage: node tests/viewer/web.js URL PNG [SECONDS]');
  process.exit(2);
}
const chromium = process.env.CHROMIUM || 'chromium';
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'pbd-web-'));
// as root, closed network: no sandbox, no background traffic; WebGL 2
// through SwiftShader (software)
const child = spawn(chromium, [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--enable-unsafe-swiftshader', '--use-angle=swiftshader', '--window-size=1280,900',
  '--user-data-dir=' + profile, '--remote-debugging-pipe', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });

let failed = false, finished = false, nextId = 1, buffer = '';
const pending = new Map();
const out = child.stdio[3], input = child.stdio[4];

function send(method, params, sessionId) {
  const id = nextId++;
  out.write(JSON.stringify({ id, method, params: params || {}, sessionId }) + '\0');
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
// Stops Chromium, then removes its profile once it has exited (it writes
// there until it does).
function quit(code) {
  const done = () => {
    try { fs.rmSync(profile, { recursive: true, force: true }); } catch (e) { /* left in tmp */ }
    process.exit(code);
  };
  if (child.exitCode !== null || child.signalCode !== null) return done();
  child.once('exit', done);
  try { child.kill('SIGKILL'); } catch (e) { done(); }
}
child.on('error', (e) => { console.error('web: cannot start ' + chromium + ': ' + e.message); quit(2); });
const timer = setTimeout(() => {
  console.error('web: no closing line within ' + (seconds || 120) + ' s');
  quit(1);
}, 1000 * Number(seconds || 120));

let session = null;
async function finish() {
  if (finished) return;
  finished = true;
  const shot = await send('Page.captureScreenshot', { format: 'png' }, session);
  fs.writeFileSync(png, Buffer.from(shot.data, 'base64'));
  console.log('web: screenshot ' + png);
  clearTimeout(timer);
  quit(failed ? 1 : 0);
}
function onEvent(msg) {
  if (msg.method === 'Runtime.consoleAPICalled') {
    const text = msg.params.args.map((a) => (a.value !== undefined ? String(a.value) : a.description || '')).join(' ');
    const error = msg.params.type === 'error' || msg.params.type === 'warning';
    console.log((error ? 'console error: ' : 'console: ') + text);
    if (error) failed = true;
    const m = /^viewer: \d+ frames of .*: (ok|FAILED)$/.exec(text);
    if (m) {
      if (m[1] !== 'ok') failed = true;
      finish().catch((e) => { console.error('web: ' + e.message); quit(1); });
    }
  } else if (msg.method === 'Runtime.exceptionThrown') {
    console.log('page error: ' + JSON.stringify(msg.params.exceptionDetails.exception ?
      msg.params.exceptionDetails.exception.description : msg.params.exceptionDetails.text));
    failed = true;
  }
}
input.on('data', (chunk) => {
  buffer += chunk.toString('utf8');
  let end;
  while ((end = buffer.indexOf('\0')) >= 0) {
    const msg = JSON.parse(buffer.slice(0, end));
    buffer = buffer.slice(end + 1);
    if (msg.id && pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(msg.error.message)); else p.resolve(msg.result);
    } else if (msg.method) onEvent(msg);
  }
});

(async () => {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  ({ sessionId: session } = await send('Target.attachToTarget', { targetId, flatten: true }));
  await send('Runtime.enable', {}, session);
  await send('Page.enable', {}, session);
  await send('Page.navigate', { url }, session);
})().catch((e) => { console.error('web: ' + e.message); quit(1); });
