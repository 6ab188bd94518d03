// Pages of other sites against a real `apollo11 serve` without a token (`cargo xtask ui`
// starts one for this test), in a real Chromium:
// - cross-site requests: a page served from another origin (a static server of this test on
//   another loopback port) sends the POSTs a page may send without asking the server first
//   (`fetch` in `no-cors` mode, `text/plain` and form bodies, a form submitted) and a JSON
//   `fetch` that needs the server's consent: no run is started, nothing is recorded.
// - DNS rebinding: `attacker.example` resolves to 127.0.0.1 (Chromium's
//   `--host-resolver-rules`), so a page of that name is same-origin with the server: every
//   answer is refused, the runs list is not read and nothing is recorded.
//
//   node attack.test.mjs http://127.0.0.1:PORT

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { call, launch, settledRun, target } from './common.mjs';

const server = target();
const port = new URL(server.base).port;
const suffix = Date.now().toString(36);
const VICTIM = `attack-victim-${suffix}`;
const FORGED = `attack-forged-${suffix}`;
const ATTACKER = 'csrf-attacker';
let browser;
let attacker;
let attackerBase;

/** The attacker's page: every POST it can send to the server, then `document.title = 'done'`. */
function attackerPage() {
  const base = JSON.stringify(server.base);
  const start = JSON.stringify(JSON.stringify({ workflow: 'flaky', run_id: FORGED }));
  const override = JSON.stringify(JSON.stringify({ to: 'succeeded', by: ATTACKER, reason: 'forged' }));
  const note = JSON.stringify(JSON.stringify({ by: ATTACKER, reason: 'forged' }));
  return `<!doctype html><title>attacker</title>
<form id="form" method="POST" enctype="text/plain" target="sink" action="${server.base}/api/v1/runs/${VICTIM}/rollback">
<input name='{"by":"${ATTACKER}","reason":"forged' value='"}'></form>
<iframe name="sink"></iframe>
<script type="module">
const base = ${base};
const sends = [
  ['/api/v1/runs', ${start}, 'text/plain'],
  ['/api/v1/runs/${VICTIM}/steps/flaky/override', ${override}, 'text/plain'],
  ['/api/v1/runs/${VICTIM}/pause', ${note}, 'application/x-www-form-urlencoded'],
  ['/api/v1/runs/${VICTIM}/resume', ${note}, 'application/json'],
];
const outcomes = [];
for (const [path, body, type] of sends) {
  const response = await fetch(base + path, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': type }, body });
  outcomes.push(response.type);
}
try {
  await fetch(base + '/api/v1/runs', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: ${start} });
  outcomes.push('cors allowed');
} catch {
  outcomes.push('cors refused');
}
const sunk = new Promise((resolve) => document.querySelector('iframe').addEventListener('load', resolve, { once: true }));
document.getElementById('form').submit();
await Promise.race([sunk, new Promise((resolve) => setTimeout(resolve, 5000))]);
window.outcomes = outcomes;
document.title = 'done';
</script>`;
}

/** The victim run's events, as the server's own API shows them. */
async function events() {
  const { status, body } = await call(server, `/api/v1/runs/${VICTIM}/events`);
  assert.equal(status, 200, JSON.stringify(body));
  return body.events;
}

async function runIds() {
  const { status, body } = await call(server, '/api/v1/runs');
  assert.equal(status, 200, JSON.stringify(body));
  return body.runs.map((r) => r.run_id);
}

before(async () => {
  const victim = await settledRun(server, 'flaky', VICTIM);
  assert.equal(victim.state, 'paused', 'the victim run waits for an operator');
  attacker = createServer((request, response) => {
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    response.end(attackerPage());
  });
  await new Promise((resolve) => attacker.listen(0, '127.0.0.1', resolve));
  attackerBase = `http://127.0.0.1:${attacker.address().port}`;
  browser = await launch(['--host-resolver-rules=MAP attacker.example 127.0.0.1']);
});

after(async () => {
  await browser?.close();
  attacker?.close();
});

test('a page of another origin cannot start a run or act on one', async () => {
  const before = await events();
  const page = await browser.newPage();
  await page.goto(`${attackerBase}/`);
  await page.waitForFunction(() => document.title === 'done', null, { timeout: 30000 });
  const outcomes = await page.evaluate(() => window.outcomes);
  assert.deepEqual(outcomes.slice(0, 4), ['opaque', 'opaque', 'opaque', 'opaque'], 'the no-cors POSTs were sent');
  assert.equal(outcomes[4], 'cors refused', 'the browser did not let a JSON POST through without the server’s consent');
  await page.close();
  // Give a request that got through the time to be recorded.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.ok(!(await runIds()).includes(FORGED), 'no run was started');
  const now = await events();
  assert.deepEqual(now, before, 'nothing was recorded on the victim run');
  assert.ok(!JSON.stringify(now).includes(ATTACKER), 'no action by the attacker');
});

test('a rebinding name resolving to the server is refused and reads nothing', async () => {
  const before = await events();
  const page = await browser.newPage();
  const rebound = `http://attacker.example:${port}`;
  const landing = await page.goto(`${rebound}/`);
  assert.equal(landing.status(), 403, 'the UI is not served under the attacker’s name');
  assert.match(await landing.text(), /Host `attacker\.example:\d+` is not a name of this server/);
  // The page is same-origin with the server now: it may read what it is answered.
  const answers = await page.evaluate(async (victim) => {
    const list = await fetch('/api/v1/runs');
    const start = await fetch('/api/v1/runs', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ workflow: 'flaky', run_id: 'rebound' }),
    });
    const override = await fetch(`/api/v1/runs/${victim}/steps/flaky/override`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ to: 'succeeded', by: 'csrf-attacker', reason: 'rebound' }),
    });
    return { list: [list.status, await list.text()], start: start.status, override: override.status };
  }, VICTIM).catch((e) => assert.fail(`the page could not even ask: ${e}`));
  assert.equal(answers.list[0], 403, answers.list[1]);
  assert.ok(!answers.list[1].includes(VICTIM), 'the runs list was not read');
  assert.equal(answers.start, 403);
  assert.equal(answers.override, 403);
  await page.close();
  assert.ok(!(await runIds()).includes('rebound'), 'no run was started');
  assert.deepEqual(await events(), before, 'nothing was recorded on the victim run');
});
