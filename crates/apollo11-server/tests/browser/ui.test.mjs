// The web UI in a real Chromium against a real `apollo11 serve` (`cargo xtask ui` starts it
// with workflows.mjs's folder and a token): the runs table and its filters; the paused
// `flaky` run taken back in time to before its failure, then paused, overridden and resumed
// through the UI to success; the 1,000-step, 10,000-event run page. Screenshots of each
// page go to APOLLO11_UI_SHOTS (default target/ui-screenshots).
//
//   node ui.test.mjs http://127.0.0.1:PORT

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, launch, openPage, settledRun, target, visit } from './common.mjs';

const server = target();
const shots = process.env.APOLLO11_UI_SHOTS
  ?? resolve(dirname(fileURLToPath(import.meta.url)), '../../../../target/ui-screenshots');
// Fresh ids, so that the test can run again on the same server.
const suffix = Date.now().toString(36);
const FLAKY = `ui-flaky-${suffix}`;
const THOUSAND = `ui-thousand-${suffix}`;
const BY = 'ui-test';
let browser;
let page;

before(async () => {
  mkdirSync(shots, { recursive: true });
  const [flaky, thousand] = await Promise.all([
    settledRun(server, 'flaky', FLAKY),
    settledRun(server, 'thousand', THOUSAND),
  ]);
  assert.equal(flaky.state, 'paused', 'the flaky run waits for an operator');
  assert.equal(thousand.state, 'succeeded');
  browser = await launch();
  page = await openPage(browser, server);
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
/** The runs the table shows: `[[run id, its row's text]]`. */
const rows = () => page.locator('table.runs tbody tr[data-run]').evaluateAll((trs) => trs.map((tr) => [tr.dataset.run, tr.innerText]));

test('the runs table lists the runs and filters them by state and workflow', async () => {
  await visit(page, server, '#/runs');
  await page.locator(`tr[data-run="${FLAKY}"]`).waitFor();
  await page.locator(`tr[data-run="${THOUSAND}"]`).waitFor();
  assert.match(await page.locator(`tr[data-run="${FLAKY}"]`).innerText(), /\tpaused\tflaky\t/);
  await shot('runs');
  await page.selectOption('select[name=state]', 'paused');
  await page.locator('table.runs[data-filter="paused|"]').waitFor();
  const paused = await rows();
  assert.ok(paused.some(([id]) => id === FLAKY), 'the paused run is listed');
  assert.ok(paused.every(([, text]) => /\tpaused\t/.test(text)), `only paused runs: ${paused}`);
  assert.match(page.url(), /state=paused/);
  await page.selectOption('select[name=state]', '');
  await page.locator('table.runs[data-filter="|"]').waitFor();
  await page.selectOption('select[name=workflow]', 'thousand');
  await page.locator('table.runs[data-filter="|thousand"]').waitFor();
  const thousand = await rows();
  assert.ok(thousand.some(([id]) => id === THOUSAND), 'the thousand run is listed');
  assert.ok(thousand.every(([, text]) => /\tthousand\t/.test(text)), `only thousand runs: ${thousand}`);
  await shot('runs-filtered');
});

/** Drags the time-travel slider's thumb to position `value` (1-based) with the mouse. */
async function drag(value) {
  const slider = page.locator('.travel input[type=range]');
  const max = Number(await slider.getAttribute('max'));
  const box = await slider.boundingBox();
  const thumb = 16; // Chromium's range thumb: the track's ends are half a thumb in
  const x = (v) => box.x + thumb / 2 + ((v - 1) / (max - 1)) * (box.width - thumb);
  const y = box.y + box.height / 2;
  await page.mouse.move(x(Number(await slider.inputValue())), y);
  await page.mouse.down();
  await page.mouse.move(x(value), y, { steps: 10 });
  await page.mouse.up();
  assert.equal(Number(await slider.inputValue()), value, 'the slider is where it was dragged');
}

const node = (step) => page.locator(`svg.dag g.node[data-step="${step}"]`);

/** Appends an action through its dialog; returns the event id the page says it appended. */
async function act(button, reason, to) {
  await button.click();
  const dialog = page.locator('#action-dialog');
  if (to) await dialog.locator('select[name=to]').selectOption(to);
  await dialog.locator('input[name=by]').fill(BY);
  await dialog.locator('textarea[name=reason]').fill(reason);
  await dialog.locator('[data-submit]').click();
  await page.waitForFunction(() => !document.querySelector('#action-dialog').open);
  const outcome = page.locator('[data-outcome]');
  await page.waitForFunction(() => /Appended event #\d+/.test(document.querySelector('[data-outcome]').textContent));
  return Number(await outcome.getAttribute('data-event-id'));
}

test('the failed run: back before the failure, then paused, overridden, resumed to success', async () => {
  const { body } = await call(server, `/api/v1/runs/${FLAKY}/events`);
  const failure = body.events.findIndex((e) => e.kind === 'failed' && e.step === 'flaky');
  assert.ok(failure > 0, 'the flaky step failed');
  await visit(page, server, `#/runs/${FLAKY}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  assert.match(await node('flaky').getAttribute('class'), /st-failed/);
  assert.ok(await page.locator('[data-action=resume]').isDisabled(), 'no operator pause to lift');
  await shot('flaky-paused');

  await drag(failure); // the slider's value is 1-based: `failure` is the event before it
  await page.waitForFunction(() => document.querySelector('svg.dag g.node[data-step="flaky"]').classList.contains('st-running'));
  assert.match(await node('flaky').locator('text.meta').textContent(), /^running · try 1/);
  assert.match(await page.locator('[data-when]').textContent(), new RegExp(`event ${failure} of ${body.events.length}`));
  assert.match(page.url(), new RegExp(`at=${body.events[failure - 1].event_id}`));
  await shot('flaky-before-failure');
  await page.getByRole('button', { name: 'Now' }).click();
  await page.waitForFunction(() => document.querySelector('svg.dag g.node[data-step="flaky"]').classList.contains('st-failed'));

  const paused = await act(page.locator('[data-action=pause]'), 'hold while the marker is checked');
  await page.waitForFunction(() => !document.querySelector('[data-action=resume]').disabled);
  await node('flaky').click();
  const overridden = await act(page.locator('[data-detail=flaky] button', { hasText: 'Override' }), 'the marker is in place: run it again', 'pending');
  const resumed = await act(page.locator('[data-action=resume]'), 'marker checked, go on');
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'succeeded', null, { timeout: 30_000 });
  assert.match(await node('flaky').getAttribute('class'), /st-succeeded/);
  for (const action of ['pause', 'resume', 'rollback']) {
    assert.ok(await page.locator(`[data-action=${action}]`).isDisabled(), `${action} is disabled on a succeeded run`);
    const refused = await call(server, `/api/v1/runs/${FLAKY}/${action}`, { method: 'POST', body: { by: BY, reason: 'disabled in the UI' } });
    assert.equal(refused.status, 409, `the server refuses ${action} too`);
  }
  const events = (await call(server, `/api/v1/runs/${FLAKY}/events`)).body.events;
  const byId = new Map(events.map((e) => [e.event_id, e]));
  assert.equal(byId.get(paused).kind, 'run_paused');
  assert.equal(byId.get(overridden).kind, 'manual_override');
  assert.equal(byId.get(overridden).to, 'pending');
  assert.equal(byId.get(resumed).kind, 'run_resumed');
  const timeline = page.locator(`table.events tr[data-event="${overridden}"]`);
  await timeline.waitFor();
  assert.match(await timeline.innerText(), new RegExp(`${BY}[\\s\\S]*to pending: the marker is in place`));
  await shot('flaky-succeeded');
  assert.deepEqual(page.errors, []);
});

test('the 1,000-step, 10,000-event run renders, its events paged', async () => {
  const { body } = await call(server, `/api/v1/runs/${THOUSAND}`);
  assert.ok(body.events >= 9000, `${body.events} events`);
  await visit(page, server, `#/runs/${THOUSAND}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor({ timeout: 30_000 });
  assert.equal(await page.locator('svg.dag g.node').count(), 1000);
  assert.equal(await page.locator('svg.dag g.node.st-succeeded').count(), 1000);
  const shown = await page.locator('table.events tbody tr').count();
  assert.ok(shown > 0 && shown <= 100, `one page of events in the DOM, not ${shown} rows`);
  assert.equal(await page.locator('table.steps tbody tr').count(), 100, 'one page of steps in the DOM');
  assert.equal(await page.locator('.travel input[type=range]').getAttribute('max'), String(body.events));
  await shot('thousand');
  await drag(Math.floor(body.events / 2));
  await page.waitForFunction(() => document.querySelectorAll('svg.dag g.node.st-pending').length > 0);
  await shot('thousand-halfway');
  assert.deepEqual(page.errors, []);
});
