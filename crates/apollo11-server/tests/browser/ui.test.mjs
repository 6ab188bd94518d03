// The web UI in a real Chromium against a real `apollo11 serve` (`cargo xtask ui` starts it
// with workflows.mjs's folder and a token): the runs table and its filters, archived runs
// among them; the paused `flaky` run taken back in time to before its failure, then paused,
// overridden and resumed through the UI to success (each dialog's submit clicked twice);
// the 1,000-step, 10,000-event run page; a `slow` run paused while its step is at work, then
// followed live past a page of events; the stream lost and back; `?at=` links to no event of
// the run; the compensated step of the `undo` run; the override choices of a step whose
// compensation failed, each saying what it does; a run of `fleet` started from the dialog (a
// wrong value said beside its field), its for_each group opened and closed, its skipped step
// saying why; a `quoted` run's command, a hostile value in it, shown as text as it ran, its
// secret in no answer or page; a step placed on the worker `cargo xtask ui` started saying
// which worker ran it; the workers page listing that worker, its try at work, and warning
// of a try whose labels no worker carries (a hostile value, shown as text); a succeeded
// `chain` run's step rerun with its downstream from its details (the confirmation saying
// what is compensated first and what runs again), running then succeeded again, the rerun
// in the timeline; a rerun refused in its dialog while a step of its set works; the failure
// classes of a `classes` run (`exit:3`, `spawn`) and why their retries stopped; the
// schedules page listing `ticks`'s two schedules, a 10-second range of one previewed and
// backfilled from its dialog, the runs then in its history; `ticks`'s `daily` paused from its
// row's button and the operators' dialog (who and why then in its row and the API), then
// resumed. Screenshots
// of each page go to APOLLO11_UI_SHOTS (default target/ui-screenshots).
//
//   node ui.test.mjs http://127.0.0.1:PORT

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { call, launch, openPage, SECRET, settledRun, target, visit } from './common.mjs';

const server = target();
const shots = process.env.APOLLO11_UI_SHOTS
  ?? resolve(dirname(fileURLToPath(import.meta.url)), '../../../../target/ui-screenshots');
// Fresh ids, so that the test can run again on the same server.
const suffix = Date.now().toString(36);
const FLAKY = `ui-flaky-${suffix}`;
const THOUSAND = `ui-thousand-${suffix}`;
const UNDO = `ui-undo-${suffix}`;
const UNDO_FAILS = `ui-undo-fails-${suffix}`;
const BY = 'ui-test';
let browser;
let page;

before(async () => {
  mkdirSync(shots, { recursive: true });
  const [flaky, thousand, undo, undoFails] = await Promise.all([
    settledRun(server, 'flaky', FLAKY),
    settledRun(server, 'thousand', THOUSAND),
    settledRun(server, 'undo', UNDO),
    settledRun(server, 'undo_fails', UNDO_FAILS),
  ]);
  assert.equal(flaky.state, 'paused', 'the flaky run waits for an operator');
  assert.equal(undoFails.state, 'paused', 'the compensation of book failed for good');
  assert.equal(thousand.state, 'succeeded');
  assert.equal(undo.state, 'rolled_back');
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

/** The action routes (POST). */
const ACTIONS = (url) => /\/(pause|resume|rollback|override)$/.test(url.pathname);

/** Records the URLs of the POST requests the page sends until `stop()`, which returns them. */
function watchPosts() {
  const posts = [];
  const sent = (request) => request.method() === 'POST' && posts.push(request.url());
  page.on('request', sent);
  return {
    stop: () => {
      page.off('request', sent);
      return posts;
    },
  };
}

/**
 * Sends an action through its dialog, its submit clicked twice: one request all the same (a
 * second one could append the event twice); returns once the dialog closed on the answer.
 */
async function submitTwice(button, reason, to) {
  await button.click();
  const dialog = page.locator('#action-dialog');
  if (to) await dialog.locator('select[name=to]').selectOption(to);
  await dialog.locator('input[name=by]').fill(BY);
  await dialog.locator('input[name=reason]').fill(reason);
  // As over a slow network: the answer takes 300 ms, so the second click finds the dialog open.
  const posts = watchPosts();
  const slow = async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    await route.continue();
  };
  await page.route(ACTIONS, slow);
  // Clicked twice, as a double click does (the second forced: it may be disabled by then).
  await dialog.locator('[data-submit]').click();
  await dialog.locator('[data-submit]').click({ force: true });
  await page.waitForFunction(() => !document.querySelector('#action-dialog').open);
  await page.unroute(ACTIONS, slow);
  const sent = posts.stop();
  assert.equal(sent.length, 1, `one request for a submit clicked twice: ${sent}`);
  return sent[0];
}

/** Appends a run action through its dialog (`submitTwice`); returns the event id the page says it appended. */
async function act(button, reason, to) {
  await submitTwice(button, reason, to);
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
  const operators = events.filter((e) => e.by === BY).map((e) => e.kind);
  assert.deepEqual(operators, ['run_paused', 'manual_override', 'run_resumed'], 'one event per submit clicked twice');
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

/** The timeline's pager: `[page shown, pages]`. */
async function timelinePage() {
  const text = await page.locator('.timeline .pager span').textContent();
  return text.match(/page (\d+) of (\d+)/).slice(1).map(Number);
}

const SLOW = `ui-slow-${suffix}`;

test('a slow run: a pause asked while its step works is pending until it finishes', async () => {
  const started = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow: 'slow', run_id: SLOW } });
  assert.equal(started.status, 201);
  await visit(page, server, `#/runs/${SLOW}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  await page.waitForFunction(() => document.querySelector('svg.dag g.node[data-step="work"]')?.classList.contains('st-running'));
  // A reason of 1,100 × "é" is 1,100 characters but 2,200 bytes: refused in the dialog, as the server would.
  await page.locator('[data-action=pause]').click();
  const dialog = page.locator('#action-dialog');
  await dialog.locator('input[name=by]').fill(BY);
  await dialog.locator('input[name=reason]').fill('é'.repeat(1100));
  const posts = watchPosts();
  await dialog.locator('[data-submit]').click();
  assert.match(await dialog.locator('[data-error]').textContent(), /reason is 2200 bytes/);
  assert.ok(await dialog.evaluate((d) => d.open), 'the dialog stays open');
  assert.deepEqual(posts.stop(), [], 'nothing sent');
  await dialog.locator('button[value=cancel]').click();

  await act(page.locator('[data-action=pause]'), 'hold while work finishes');
  await page.locator('[data-pausing]').waitFor();
  assert.equal(await page.locator('[data-pausing]').textContent(), 'pausing (waiting for 1 step)');
  await shot('slow-pausing');
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'paused', null, { timeout: 30_000 });
  assert.equal(await page.locator('[data-pausing]').count(), 0);
  assert.deepEqual(page.errors, []);
});

test('the slow run resumed: the timeline follows it live past its first page', async () => {
  await act(page.locator('[data-action=resume]'), 'go on');
  await page.waitForFunction(() => document.querySelectorAll('table.events tbody tr').length > 0
    && /page ([2-9]|\d\d+) of/.test(document.querySelector('.timeline .pager span').textContent), null, { timeout: 60_000 });
  const [shown, pages] = await timelinePage();
  assert.equal(shown, pages, 'at "Now", the timeline shows its last page');
  const lastRow = await page.locator('table.events tbody tr').last().getAttribute('class');
  assert.match(lastRow ?? '', /current/, 'the newest event is marked');
  await shot('slow-live');
  assert.deepEqual(page.errors, []);
});

test('a lost event stream is said until it is back', async () => {
  const stream = (url) => url.pathname.endsWith('/events/stream');
  await page.route(stream, (route) => route.abort('connectionrefused'));
  await visit(page, server, `#/runs/${FLAKY}`);
  const notice = page.locator('[data-connection]');
  await notice.waitFor({ state: 'visible' });
  assert.match(await notice.textContent(), /Connection to the server lost.*retrying/);
  await shot('connection-lost');
  await page.unroute(stream);
  await notice.waitFor({ state: 'hidden', timeout: 5_000 });
});

test('an ?at= link to no event of this run says so', async () => {
  const thousand = (await call(server, `/api/v1/runs/${THOUSAND}/events?limit=5`)).body.events;
  const flaky = (await call(server, `/api/v1/runs/${FLAKY}/events`)).body.events.map((e) => e.event_id);
  const other = thousand.find((e) => !flaky.includes(e.event_id)).event_id;
  for (const at of [String(other), '999999', 'abc']) {
    await visit(page, server, `#/runs/${FLAKY}?at=${at}`);
    const notice = page.locator('[data-notice]');
    await notice.waitFor({ state: 'visible' });
    assert.equal(await notice.textContent(), `Event ${at} is not an event of this run: the run is shown now.`);
  }
  await shot('bad-at');
  await visit(page, server, `#/runs/${FLAKY}?at=${flaky[1]}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  assert.match(await page.locator('[data-when]').textContent(), /^As it stood after event 2 of/);
  assert.ok(await page.locator('[data-notice]').isHidden());
});

test('a compensated step links the log of its compensation and says what it undid', async () => {
  await visit(page, server, `#/runs/${UNDO}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  await node('book').click();
  const detail = page.locator('[data-detail=book]');
  assert.match(await detail.innerText(), /Compensation\s+ran: the work of try 1 was undone/);
  await detail.locator('[data-compensation-log]').click();
  await page.waitForFunction(() => /unbooked/.test(document.querySelector('[data-detail=book] [data-log]').textContent));
  await detail.locator('[data-attempt-log]').click();
  await page.waitForFunction(() => /^booked/.test(document.querySelector('[data-detail=book] [data-log]').textContent));
  await shot('undo-compensated');
  assert.deepEqual(page.errors, []);
});

test('archived runs: listed on asking, marked, and their page says so', async () => {
  // The server here runs no gc: its answers are marked archived as a server's after gc are.
  const archive = async (route) => {
    const answer = await route.fetch();
    const body = await answer.json();
    for (const run of body.runs ?? [body]) run.archived = run.run_id === UNDO;
    await route.fulfill({ response: answer, json: body });
  };
  const runs = (url) => url.pathname.startsWith('/api/v1/runs') && !url.pathname.includes('/events');
  await page.route(runs, archive);
  await visit(page, server, '#/runs');
  await page.locator(`tr[data-run="${UNDO}"]`).waitFor();
  const asked = page.waitForRequest((r) => r.url().includes('all=true'));
  await page.locator('input[name=all]').check();
  await asked;
  await page.locator('table.runs[data-filter="||all"]').waitFor();
  assert.match(page.url(), /all=true/);
  assert.equal(await page.locator(`tr[data-run="${UNDO}"] .tag`).textContent(), 'archived');
  await shot('runs-archived');
  await visit(page, server, `#/runs/${UNDO}`);
  await page.locator('[data-archived]').waitFor();
  await shot('undo-archived');
  await page.unroute(runs);
});

test('a 200-character run id and the run page fit a 375 px screen', async () => {
  const LONG = `ui-long-${suffix}-`.padEnd(200, 'x');
  const long = await settledRun(server, 'undo', LONG);
  assert.equal(long.state, 'rolled_back');
  const wide = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  await visit(page, server, '#/runs');
  await page.locator(`tr[data-run="${LONG}"]`).waitFor();
  assert.ok(await wide() <= 0, `the runs page is ${await wide()} px wider than the window`);
  await page.setViewportSize({ width: 375, height: 800 });
  try {
    assert.ok(await wide() <= 0, `the runs page at 375 px is ${await wide()} px too wide`);
    await shot('runs-375');
    await visit(page, server, `#/runs/${FLAKY}`);
    await page.locator('.travel input[type=range]:not([disabled])').waitFor();
    assert.ok(await wide() <= 0, `the run page at 375 px is ${await wide()} px too wide`);
    await shot('flaky-375');
  } finally {
    await page.setViewportSize({ width: 1400, height: 1000 });
  }
});

/** Overrides `step` of run `runId` to `to` through the API; waits (30 s at most) for the run to settle after it. */
async function overrideAndSettle(runId, step, to) {
  const path = `/api/v1/runs/${runId}/steps/${step}/override`;
  const answer = await call(server, path, { method: 'POST', body: { to, by: BY, reason: `set ${step} to ${to}` } });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { body } = await call(server, `/api/v1/runs/${runId}`);
    if (body.state === 'succeeded') return body;
    if (Date.now() > deadline) throw new Error(`run ${runId} is ${body.state} 30 s after the override`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Opens the page of run `runId` and the details of its step `step`. */
async function openStep(runId, step) {
  await visit(page, server, `#/runs/${runId}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  await node(step).click();
  return page.locator(`[data-detail=${step}]`);
}

test('every try of a step has its log: the first, failed, one too', async () => {
  const id = `ui-tries-${suffix}`;
  await settledRun(server, 'flaky', id);
  await overrideAndSettle(id, 'flaky', 'pending');
  const detail = await openStep(id, 'flaky');
  const pick = detail.locator('select[data-log-try]');
  assert.deepEqual(await pick.locator('option').allTextContents(), ['try 2', 'try 1']);
  await pick.selectOption('1');
  await page.waitForFunction(() => /first try fails on purpose/.test(document.querySelector('[data-detail=flaky] [data-log]').textContent));
  assert.equal(await detail.locator('[data-log-of]').textContent(), 'Log of try 1:');
  await pick.selectOption('2');
  await page.waitForFunction(() => /a later try: ok/.test(document.querySelector('[data-detail=flaky] [data-log]').textContent));
  await shot('tries-logs');
  assert.deepEqual(page.errors, []);
});

test('a step skipped after it failed still shows its last error, the skip after it', async () => {
  const id = `ui-skipped-${suffix}`;
  await settledRun(server, 'flaky', id);
  const failure = (await call(server, `/api/v1/runs/${id}/events`)).body.events.find((e) => e.kind === 'failed' && e.step === 'flaky');
  await overrideAndSettle(id, 'flaky', 'skipped');
  const detail = await openStep(id, 'flaky');
  const shown = await detail.locator('dt:text-is("Last error") + dd').innerText();
  assert.ok(shown.startsWith(`[${failure.class}] ${failure.error} (try 1)`), shown);
  assert.match(shown, new RegExp(`then overridden to skipped by ${BY}: set flaky to skipped`));
  assert.match(await page.locator('table.steps tr[data-step=flaky] td.error-text').getAttribute('title'), /then overridden to skipped/);
  await shot('skipped-last-error');
  assert.deepEqual(page.errors, []);
});

test('the timeline says where a try was placed in words, not as the raw handle', async () => {
  const id = `ui-placed-${suffix}`;
  await settledRun(server, 'undo', id);
  const placed = (await call(server, `/api/v1/runs/${id}/events`)).body.events.find((e) => e.kind === 'placed');
  const group = JSON.parse(placed.handle);
  await visit(page, server, `#/runs/${id}`);
  const row = page.locator(`table.events tr[data-event="${placed.event_id}"] td.why`);
  await row.waitFor();
  const where = `pid ${group.pgid} on ${placed.host} (boot ${group.boot.slice(0, 8)})`;
  assert.equal(await row.textContent(), `${where}${placed.payload.command}`, 'where, then the command');
  assert.deepEqual(page.errors, []);
});

/** A value the shell would run if it were not one quoted word, and markup if it were HTML. */
const HOSTILE = `x; touch pwned <b>bold</b> <script>window.pwned = 1</script> "it's"`;

test('a step\'s command shows as it ran, as text, in the timeline and the step\'s details', async () => {
  const id = `ui-quoted-${suffix}`;
  const run = await settledRun(server, 'quoted', id, 60, { word: HOSTILE });
  assert.equal(run.state, 'succeeded', 'the step had its secret');
  const { placed } = run.steps.say;
  const command = `echo 'x; touch pwned <b>bold</b> <script>window.pwned = 1</script> "it'\\''s"' && [ -n "$APOLLO11_SECRET_TOKEN" ]`;
  assert.equal(placed.payload.command, command, 'the value one quoted word, the secret its variable');
  assert.ok(!existsSync(join(placed.payload.cwd, 'pwned')), 'the value ran as no command');
  await visit(page, server, `#/runs/${id}`);
  const cell = page.locator(`table.events tr[data-event="${placed.event_id}"] td.why`);
  await cell.waitFor();
  assert.equal(await cell.locator('[data-command]').textContent(), command);
  const detail = await openStep(id, 'say');
  assert.equal(await detail.locator('[data-last-command]').textContent(), command);
  assert.match(await detail.locator('[data-ran]').textContent(), /^try 1: pid \d+ on \S+ \(boot [0-9a-f]{8}\)$/);
  assert.equal(await page.locator('td.why b, td.why script, [data-detail] b, [data-detail] script').count(), 0, 'no markup made of the value');
  assert.equal(await page.evaluate(() => window.pwned), undefined, 'no script of the value ran');
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.base });
  await detail.locator('[data-copy-command]').click();
  await page.waitForFunction(() => document.querySelector('[data-copy-command]').textContent === 'Copied');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), command, 'the copy is the command as it ran');
  await detail.locator('[data-attempt-log]').click();
  await page.waitForFunction(() => document.querySelector('[data-log]').textContent.includes('touch pwned'));
  await shot('quoted-command');
  assert.ok(!(await page.content()).includes(SECRET), 'the page holds no secret');
  assert.deepEqual(page.errors, []);
});

test('the secret of a run is in no answer of the API', async () => {
  const id = `ui-quoted-${suffix}`;
  const { body: run } = await call(server, `/api/v1/runs/${id}`);
  const paths = [`/api/v1/runs/${id}`, `/api/v1/runs/${id}/events`, `/api/v1/runs/${id}/plan`,
    '/api/v1/runs?workflow=quoted', '/api/v1/workflows', run.steps.say.log];
  for (const path of paths) {
    const response = await fetch(server.base + path, { headers: server.token ? { Authorization: `Bearer ${server.token}` } : {} });
    assert.equal(response.status, 200, path);
    assert.ok(!(await response.text()).includes(SECRET), `${path} holds no secret`);
  }
});

test('the override choices of a step whose compensation failed say what each does', async () => {
  await visit(page, server, `#/runs/${UNDO_FAILS}`);
  await node('book').waitFor();
  await node('book').click();
  await page.locator('[data-detail=book] button', { hasText: 'Override' }).click();
  const dialog = page.locator('#action-dialog');
  const options = await dialog.locator('select[name=to] option').evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
  assert.deepEqual(options, [
    ['succeeded', 'succeeded (its compensation runs again)'],
    ['pending', 'pending (the rollback leaves it as it is)'],
    ['skipped', 'skipped (the rollback leaves it as it is)'],
    ['failed', 'failed (the rollback leaves it as it is)'],
  ], 'each label says what the server says the override does');
  await shot('undo-fails-override');
  await dialog.locator('button[value=cancel]').click();
  await page.waitForFunction(() => !document.querySelector('#action-dialog').open);
  assert.deepEqual(page.errors, []);
});

/** The start dialog's field of parameter `name`, and the error said beside it. */
const paramField = (name) => page.locator(`#start-dialog [data-param-field="${name}"]`);
const paramError = (name) => page.locator(`#start-dialog [data-param-error="${name}"]`);

test('a run started from the dialog: wrong values said beside their fields, then its page', async () => {
  await visit(page, server, '#/runs');
  await page.locator('[data-start]').click();
  const dialog = page.locator('#start-dialog');
  await dialog.locator('select[name=workflow] option[value=fleet]').waitFor({ state: 'attached' });
  await dialog.locator('select[name=workflow]').selectOption('fleet');
  await paramField('label').locator('.required').waitFor();
  assert.equal(await dialog.locator('textarea[name=param-hosts]').inputValue(), '["web-1","web-2","web-3"]', 'the default is filled in');
  assert.equal(await dialog.locator('input[name=param-rows]').inputValue(), '3');
  assert.ok(await dialog.locator('input[name=param-full]').isChecked());
  assert.match(await paramField('token').innerText(), /A secret: not asked for here\. The server reads it from the server's environment variable PATH/);
  assert.equal(await paramField('token').locator('input, textarea').count(), 0, 'a secret has no input');
  await shot('start-dialog');

  // Checked here: no label, a list that is no JSON; nothing is sent.
  const posts = watchPosts();
  await dialog.locator('textarea[name=param-hosts]').fill('["web-1",');
  await dialog.locator('[data-submit]').click();
  assert.equal(await paramError('label').textContent(), 'required');
  assert.match(await paramError('hosts').textContent(), /^not JSON/);
  assert.deepEqual(posts.stop(), [], 'nothing sent while a value is wrong here');

  // Refused by the server, which says which parameter: an integer past what it reads as one.
  await dialog.locator('input[name=param-label]').fill('ui');
  await dialog.locator('textarea[name=param-hosts]').fill('["web-1", "web-2"]');
  await dialog.locator('input[name=param-rows]').fill('99999999999999999999');
  await dialog.locator('[data-submit]').click();
  await page.waitForFunction(() => document.querySelector('#start-dialog [data-param-error="rows"]').textContent !== '');
  assert.match(await paramError('rows').textContent(), /parameter `rows` must be an integer/);
  assert.equal(await paramError('hosts').textContent(), '', 'the error fixed is gone');
  assert.ok(await dialog.evaluate((d) => d.open), 'the dialog stays open');
  await shot('start-refused');

  await dialog.locator('input[name=param-rows]').fill('4');
  await dialog.locator('[data-submit]').click();
  await page.waitForFunction(() => /^#\/runs\/fleet/.test(location.hash));
  const runId = decodeURIComponent(new URL(page.url()).hash.replace('#/runs/', ''));
  FLEET_RUN = runId;
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'succeeded', null, { timeout: 30_000 });
  const { body } = await call(server, `/api/v1/runs/${runId}`);
  assert.deepEqual(body.arguments, { full: true, hosts: ['web-1', 'web-2'], label: 'ui', rows: 4 });
  assert.equal(await page.locator('[data-param=rows]').textContent(), '4');
  assert.match(await page.locator('[data-param=token]').textContent(), /^•+ \(secret, read from the server's environment variable PATH/);
  assert.ok(!(await page.locator('[data-params]').innerText()).includes('/usr/bin'), 'a secret\'s value is never shown');
  assert.deepEqual(page.errors, []);
});

let FLEET_RUN = null;
const group = (decl) => page.locator(`svg.dag g.node[data-group="${decl}"]`);

test('the steps of a for_each are one group in the graph, opened and closed', async () => {
  assert.ok(FLEET_RUN, 'the run the dialog started');
  await visit(page, server, `#/runs/${FLEET_RUN}`);
  await page.locator('.travel input[type=range]:not([disabled])').waitFor();
  await group('upgrade').waitFor();
  assert.equal(await group('upgrade').locator('text.meta').textContent(), '2 succeeded');
  assert.match(await group('upgrade').getAttribute('class'), /st-succeeded/);
  assert.equal(await node('upgrade[web-1]').count(), 0, 'its steps are in the group');
  await shot('fleet-grouped');
  await group('upgrade').click();
  await node('upgrade[web-2]').waitFor();
  assert.equal(await group('upgrade').count(), 0);
  assert.equal(await page.locator('svg.dag g.node').count(), 4);
  await node('upgrade[web-2]').click();
  assert.match(await page.locator('[data-detail="upgrade[web-2]"] [data-origin]').textContent(), /for_each of upgrade: item web-2/);
  await shot('fleet-open');
  const toggle = page.locator('[data-group-toggle=upgrade]');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  await toggle.click();
  await group('upgrade').waitFor();
  assert.equal(await page.locator('svg.dag g.node').count(), 3);
  assert.match(await toggle.textContent(), /▸ upgrade: 2 steps \(2 succeeded\)/);
  assert.deepEqual(page.errors, []);
});

test('a skipped step says why; a step shows its trigger rule and condition', async () => {
  await visit(page, server, `#/runs/${FLEET_RUN}`);
  await node('notify').waitFor();
  assert.match(await node('notify').getAttribute('class'), /st-skipped/);
  assert.match(await node('notify').locator('title').textContent(), /trigger one_failed\nskipped: /);
  await node('notify').click();
  const notify = page.locator('[data-detail=notify]');
  assert.match(await notify.locator('[data-skip-reason]').textContent(), /one_failed/);
  assert.equal(await notify.locator('[data-trigger]').getAttribute('data-trigger'), 'one_failed');
  assert.match(await page.locator('table.steps tr[data-step=notify] td.error-text').textContent(), /^skipped: /);
  await shot('fleet-skipped');
  await node('report').click();
  assert.equal(await page.locator('[data-detail=report] [data-condition]').textContent(), 'params.full == true');
  assert.deepEqual(page.errors, []);
});

/** The worker `cargo xtask ui` started for this server. */
const WORKER = process.env.APOLLO11_UI_WORKER;

test('a step placed on a worker says which worker ran it, in its details and the timeline', async () => {
  assert.ok(WORKER, 'APOLLO11_UI_WORKER names the test\'s worker');
  const id = `ui-on-worker-${suffix}`;
  const run = await settledRun(server, 'placed', id, 60);
  assert.equal(run.state, 'succeeded');
  const { placed } = run.steps.remote;
  const handle = JSON.parse(placed.handle);
  assert.equal(handle.worker, WORKER, 'the API says the worker ran it');
  const where = `worker ${WORKER} (host ${placed.host}): pid ${handle.group.pgid} (boot ${handle.group.boot.slice(0, 8)})`;
  const detail = await openStep(id, 'remote');
  assert.equal(await detail.locator('[data-ran]').textContent(), `try 1: ${where}`);
  const cell = page.locator(`table.events tr[data-event="${placed.event_id}"] td.why`);
  assert.equal(await cell.textContent(), `${where}${placed.payload.command}`, 'where, then the command');
  await detail.locator('[data-attempt-log]').click();
  await page.waitForFunction(() => document.querySelector('[data-detail=remote] [data-log]').textContent === 'on a worker\n');
  await shot('placed-on-worker');
  await node('local').click();
  assert.match(await page.locator('[data-detail=local] [data-ran]').textContent(), /^try 1: pid \d+ on \S+ \(boot [0-9a-f]{8}\)$/, 'a step of the engine says so');
  assert.deepEqual(page.errors, []);
});

test('the workers page lists the worker, its tries at work, and warns of tries no worker can take', async () => {
  const { body } = await call(server, '/api/v1/workers');
  const listed = body.workers.find((w) => w.name === WORKER);
  assert.ok(listed, `the worker is listed: ${JSON.stringify(body)}`);
  assert.match(listed.labels.note, /<script>/, 'a label the page must show as text');
  await visit(page, server, '#/runs');
  await page.locator('nav.pages a[data-page=workers]').click();
  const row = page.locator(`table.workers tr[data-worker="${WORKER}"]`);
  await row.waitFor();
  assert.match(await page.locator('nav.pages a[data-page=workers]').getAttribute('class'), /here/);
  assert.deepEqual(await row.locator('code.label').allTextContents(), Object.entries(listed.labels).map(([k, v]) => `${k}=${v}`));
  const cells = await row.locator('td').allTextContents();
  assert.equal(cells[0], WORKER);
  assert.equal(cells[3], `0 / ${listed.slots}`);
  assert.match(cells[4], / ago$/, 'the last heartbeat');
  assert.match(cells[5], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/, 'connected since');
  assert.equal(await page.locator('table.queue tbody').textContent(), 'No try waits for a worker.');
  assert.ok(await page.locator('[data-unmatched]').isHidden());

  // A try at work counts, then no longer: the page polls.
  const busy = `ui-worker-busy-${suffix}`;
  const started = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow: 'placed', run_id: busy, params: { pause: 3 } } });
  assert.equal(started.status, 201);
  await page.waitForFunction(([name, text]) => document.querySelector(`tr[data-worker="${name}"] [data-running]`)?.textContent === text, [WORKER, `1 / ${listed.slots}`], { timeout: 15_000 });
  await shot('workers-busy');
  await page.waitForFunction(([name, text]) => document.querySelector(`tr[data-worker="${name}"] [data-running]`)?.textContent === text, [WORKER, `0 / ${listed.slots}`], { timeout: 15_000 });

  // A try needing a label no worker carries: queued, and said so; its labels shown as text.
  const stuck = `ui-worker-none-${suffix}`;
  const queued = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow: 'placed', run_id: stuck, params: { role: HOSTILE } } });
  assert.equal(queued.status, 201);
  const warning = page.locator('[data-unmatched]');
  await warning.waitFor({ state: 'visible', timeout: 15_000 });
  assert.match(await warning.textContent(), /no connected worker carries/);
  const waiting = page.locator('table.queue tr.unmatched');
  assert.deepEqual(await waiting.locator('code.label').allTextContents(), [`role=${HOSTILE}`]);
  const queue = await waiting.locator('td').allTextContents();
  assert.equal(queue[1], '1', 'one try waits');
  assert.equal(queue[3], '⚠ no connected worker carries these labels');
  assert.equal(await page.locator('main b, main script').count(), 0, 'no markup made of a label');
  assert.equal(await page.evaluate(() => window.pwned), undefined, 'no script of a label ran');
  await shot('workers-unmatched');

  // The step skipped: its try leaves the queue, and the warning goes.
  await overrideAndSettle(stuck, 'remote', 'skipped');
  await page.locator('table.queue tr.unmatched').waitFor({ state: 'detached', timeout: 15_000 });
  await warning.waitFor({ state: 'hidden' });
  assert.deepEqual(page.errors, []);
});

/** The steps table's row of `step`, on the run page shown. */
const stepRow = (step) => page.locator(`table.steps tr[data-step="${step}"]`);
const CHAIN = `ui-chain-${suffix}`;

test('a finished run: a step rerun with its downstream, compensated first, runs again to success', async () => {
  // `charge` sleeps 2 s: the rerun is seen running before it succeeds again.
  const run = await settledRun(server, 'chain', CHAIN, 60, { pause: 2 });
  assert.equal(run.state, 'succeeded');
  const detail = await openStep(CHAIN, 'book');
  await detail.locator('[data-rerun=downstream]').click();
  const dialog = page.locator('#action-dialog');
  await page.waitForFunction(() => document.querySelector('#action-dialog').open
    && document.querySelector('#action-dialog [data-help]').textContent !== '');
  assert.equal(await dialog.locator('[data-title]').textContent(), 'Rerun step book and the steps after it');
  assert.equal(await dialog.locator('[data-help]').textContent(),
    'First compensated, in this order: charge, book. Then run again, each with a fresh budget of attempts: book, charge, notify.');
  assert.ok(await dialog.locator('[data-submit]').isEnabled());
  assert.ok(await dialog.locator('[data-to-row]').isHidden(), 'a rerun sets no state');
  await dialog.locator('input[name=by]').fill(BY);
  await dialog.locator('input[name=reason]').fill('the booking service was fixed');
  await shot('chain-rerun-confirm');
  const posts = watchPosts();
  await dialog.locator('[data-submit]').click();
  await page.waitForFunction(() => /Appended event #\d+/.test(document.querySelector('[data-outcome]').textContent));
  assert.deepEqual(posts.stop(), [`${server.base}/api/v1/runs/${CHAIN}/steps/book/rerun`]);
  const rerun = Number(await page.locator('[data-outcome]').getAttribute('data-event-id'));
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'running', null, { timeout: 10_000 });
  await shot('chain-rerunning');
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'succeeded', null, { timeout: 30_000 });

  const events = (await call(server, `/api/v1/runs/${CHAIN}/events`)).body.events;
  const after = events.slice(events.findIndex((e) => e.event_id === rerun));
  assert.deepEqual(after[0], { ...after[0], kind: 'rerun_requested', by: BY, steps: ['book', 'charge', 'notify'], compensate: ['charge', 'book'] });
  const done = (kind) => after.filter((e) => e.kind === kind).map((e) => e.step);
  assert.deepEqual(done('compensated'), ['charge', 'book'], 'compensated in reverse order first');
  assert.deepEqual(done('succeeded'), ['book', 'charge', 'notify'], 'then run again in order; fetch is left as it is');
  const row = page.locator(`table.events tr[data-event="${rerun}"]`);
  await row.waitFor();
  assert.match(await row.innerText(), /rerun requested/);
  assert.equal(await row.locator('td.why').textContent(),
    'the booking service was fixed; First compensated, in this order: charge, book. Then run again, each with a fresh budget of attempts: book, charge, notify.');
  for (const [step, tries] of [['fetch', '1'], ['book', '2'], ['charge', '2'], ['notify', '2']]) {
    assert.equal(await stepRow(step).locator('td').nth(2).textContent(), tries, `${step} ran ${tries} time(s)`);
  }
  await shot('chain-rerun-succeeded');
  assert.deepEqual(page.errors, []);
});

test('a waiting step is signalled from its details, with JSON data that becomes its output', async () => {
  const id = `ui-approve-${suffix}`;
  const started = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow: 'approve', run_id: id } });
  assert.equal(started.status, 201);
  const detail = await openStep(id, 'gate');
  await detail.locator('[data-waiting=signal]').waitFor({ timeout: 10_000 });
  assert.equal(await detail.locator('[data-waiting]').textContent(), 'waiting for a signal');
  await detail.locator('[data-signal]').click();
  const dialog = page.locator('#action-dialog');
  assert.equal(await dialog.locator('[data-title]').textContent(), 'Signal step gate');
  assert.equal(await dialog.locator('textarea[name=data]').inputValue(), '{"approved": true}');
  await dialog.locator('textarea[name=data]').fill('{"wave": 2');
  await dialog.locator('input[name=by]').fill(BY);
  await dialog.locator('input[name=reason]').fill('wave 1 looks fine');
  const posts = watchPosts();
  await dialog.locator('[data-submit]').click();
  assert.match(await dialog.locator('[data-error]').textContent(), /^data is not JSON/);
  await dialog.locator('textarea[name=data]').fill('{"wave": 2}');
  await shot('approve-signal');
  await dialog.locator('[data-submit]').click();
  await page.waitForFunction(() => /Appended event #\d+/.test(document.querySelector('[data-outcome]').textContent));
  assert.deepEqual(posts.stop(), [`${server.base}/api/v1/runs/${id}/steps/gate/signal`]);
  await page.waitForFunction(() => document.querySelector('.head .badge')?.textContent === 'succeeded', null, { timeout: 15_000 });
  const events = (await call(server, `/api/v1/runs/${id}/events`)).body.events;
  const signalled = events.find((e) => e.kind === 'signalled');
  assert.deepEqual(signalled, { ...signalled, step: 'gate', by: BY, reason: 'wave 1 looks fine', payload: { wave: 2 } });
  const again = await call(server, `/api/v1/runs/${id}/steps/gate/signal`, { method: 'POST', body: { by: BY, reason: 'twice' } });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'not_waiting');
  assert.deepEqual(page.errors, []);
});

test('a rerun of a step at work is refused in its dialog, with the reason, and sends nothing', async () => {
  const id = `ui-chain-busy-${suffix}`;
  const started = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow: 'chain', run_id: id, params: { pause: 30 } } });
  assert.equal(started.status, 201);
  const detail = await openStep(id, 'book');
  await page.waitForFunction(() => document.querySelector('svg.dag g.node[data-step="charge"]')?.classList.contains('st-running'), null, { timeout: 15_000 });
  const dialog = page.locator('#action-dialog');
  const posts = watchPosts();
  for (const [button, title] of [['downstream', 'Rerun step book and the steps after it'], ['step', null]]) {
    const step = button === 'step' ? 'charge' : 'book';
    const target = button === 'step' ? await openStep(id, 'charge') : detail;
    await target.locator(`[data-rerun=${button}]`).click();
    await page.waitForFunction(() => document.querySelector('#action-dialog').open
      && document.querySelector('#action-dialog [data-help]').textContent !== '');
    assert.equal(await dialog.locator('[data-title]').textContent(), title ?? `Rerun step ${step}`);
    assert.match(await dialog.locator('[data-help]').textContent(), /^Refused now: .*\bcharge\b/);
    assert.ok(await dialog.locator('[data-submit]').isDisabled(), 'nothing to confirm');
    if (button === 'downstream') await shot('chain-rerun-refused');
    await dialog.locator('button[value=cancel]').click();
    await page.waitForFunction(() => !document.querySelector('#action-dialog').open);
  }
  assert.deepEqual(posts.stop(), [], 'nothing sent');
  assert.equal((await call(server, `/api/v1/runs/${id}`)).body.state, 'running');
  assert.deepEqual(page.errors, []);
});

test('a failed step\'s class shows in the steps table, its details, the timeline and the pause banner; why its retries stopped, in all but the table', async () => {
  const id = `ui-classes-${suffix}`;
  const run = await settledRun(server, 'classes', id, 60);
  assert.equal(run.state, 'paused');
  assert.equal(run.steps.exits.error_class, 'exit:3');
  assert.equal(run.steps.page.error_class, 'spawn');
  const events = (await call(server, `/api/v1/runs/${id}/events`)).body.events;
  const failed = (step) => events.filter((e) => e.kind === 'failed' && e.step === step).at(-1);
  const detail = await openStep(id, 'exits');
  assert.match(await stepRow('exits').locator('td.error-text').textContent(), /^\[exit:3\] exited with code 3/);
  assert.match(await stepRow('page').locator('td.error-text').textContent(), /^\[spawn\] exited with code 127/);
  assert.match(await detail.locator('dt:text-is("Last error") + dd').innerText(), /^\[exit:3\] exited with code 3/);
  assert.equal(await detail.locator('[data-error-stopped]').textContent(), 'retries stopped: the same failure repeated (2 in a row, class exit:3)');
  assert.match(await page.locator('.head .banner.paused').textContent(),
    /^Waiting for an operator: step exits failed after 2 tries: \[exit:3\] exited with code 3 .*\(the same failure repeated \(2 in a row, class exit:3\)\)$/);
  assert.match(await page.locator(`table.events tr[data-event="${failed('exits').event_id}"] td.why`).textContent(),
    /^\[exit:3\] exited with code 3 .* — stopped: the same failure repeated \(2 in a row, class exit:3\)$/);
  await shot('classes-exit');
  await node('page').click();
  assert.match(await page.locator('[data-detail=page] dt:text-is("Last error") + dd').innerText(), /^\[spawn\] exited with code 127/);
  assert.equal(await page.locator('[data-detail=page] [data-error-stopped]').textContent(), 'retries stopped: class spawn is never retried by default');
  assert.match(await page.locator(`table.events tr[data-event="${failed('page').event_id}"] td.why`).textContent(),
    /^\[spawn\] exited with code 127 .* — stopped: class spawn is never retried by default$/);
  await shot('classes-spawn');
  assert.deepEqual(page.errors, []);
});

test('the schedules page lists each schedule with its next fires, and backfills a range of one', async () => {
  await visit(page, server, '#/schedules');
  const second = page.locator('table.schedules tr[data-schedule="ticks/second"]');
  const daily = page.locator('table.schedules tr[data-schedule="ticks/daily"]');
  await second.waitFor();
  assert.match(await second.locator('[data-state]').textContent(), /^disabled/);
  assert.match(await daily.locator('[data-state]').textContent(), /^enabled/);
  assert.match(await daily.locator('td').nth(1).textContent(), /^30 4 \* \* \*Europe\/Paris$/);
  // The daily fire at 04:30 in Paris, and the same instant in UTC (03:30 or 02:30).
  assert.match(await daily.locator('[data-next]').innerText(), /^\d{4}-\d\d-\d\d 04:30:00 Europe\/Paris\n\d{4}-\d\d-\d\dT0[23]:30:00Z$/);
  assert.match(await second.locator('[data-next]').innerText(), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(await page.locator('nav.pages a.here').textContent(), 'Schedules');
  await shot('schedules');

  const from = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
  const stamp = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  const id = (ms) => `ticks-second-${stamp(ms).replace(/[-:]/g, '')}`;
  await second.locator('[data-backfill]').click();
  const dialog = page.locator('#backfill-dialog');
  assert.equal(await dialog.locator('[data-title]').textContent(), 'Backfill ticks / second');
  assert.ok(await dialog.locator('[data-backfill-start]').isDisabled(), 'no start before a preview');
  await dialog.locator('input[name=from]').fill('yesterday');
  await dialog.locator('[data-preview]').click();
  assert.equal(await dialog.locator('[data-error]').textContent(), 'from: not a UTC instant like 2026-12-06T03:00:00Z');
  await dialog.locator('input[name=from]').fill(stamp(from));
  await dialog.locator('input[name=to]').fill(stamp(from + 9_000));
  await dialog.locator('input[name=max_parallel]').fill('3');
  const posts = watchPosts();
  await dialog.locator('[data-preview]').click();
  await page.waitForFunction(() => !document.querySelector('#backfill-dialog [data-backfill-start]').disabled);
  assert.equal(await dialog.locator('[data-result]').evaluate((n) => n.firstChild.textContent),
    '10 fire times in the range, 0 with a run already: 10 runs would start.');
  assert.deepEqual(await dialog.locator('[data-ids] a').allTextContents(), [0, 1, 2, 3, 4].map((i) => id(from + i * 1000)));
  assert.equal(await dialog.locator('[data-ids] li.muted').textContent(), 'and 5 more');
  assert.equal(await dialog.locator('[data-backfill-start]').textContent(), 'Start backfill: 10 runs');
  assert.equal((await call(server, `/api/v1/runs/${id(from)}`)).status, 404, 'a preview starts nothing');
  await shot('schedules-backfill-preview');
  await dialog.locator('[data-backfill-start]').click();
  await page.waitForFunction(() => /^Started /.test(document.querySelector('#backfill-dialog [data-result]').textContent));
  assert.equal(await dialog.locator('[data-result]').evaluate((n) => n.firstChild.textContent), 'Started 10 runs, at most 3 at once.');
  assert.ok(await dialog.locator('[data-backfill-start]').isDisabled(), 'a start needs a new preview');
  assert.deepEqual(posts.stop(), [`${server.base}/api/v1/schedules/backfill`, `${server.base}/api/v1/schedules/backfill`]);
  await dialog.locator('button[value=cancel]').click();
  const history = page.locator('[data-history-of="ticks/second"]');
  await history.locator(`li[data-run="${id(from + 9_000)}"]`).waitFor({ timeout: 15_000 });
  await page.waitForFunction(() => {
    const runs = [...document.querySelectorAll('[data-history-of="ticks/second"] li[data-run]')];
    return runs.length === 10 && runs.every((li) => li.querySelector('.badge').textContent === 'succeeded');
  }, null, { timeout: 30_000 });
  await second.locator(`[data-last] a[href="#/runs/${id(from + 9_000)}"]`).waitFor();
  assert.match(await second.locator('[data-last]').innerText(), new RegExp(`^${stamp(from + 9_000)}\n${id(from + 9_000)} succeeded$`, 'm'));
  await page.setViewportSize({ width: 375, height: 800 });
  const wide = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(await wide() <= 0, `the schedules page at 375 px is ${await wide()} px too wide`);
  await shot('schedules-375');
  await page.setViewportSize({ width: 1400, height: 1000 });
  assert.deepEqual(page.errors, []);
});

test('a schedule paused from its row, who and why shown, then resumed', async () => {
  await visit(page, server, '#/schedules');
  const daily = page.locator('table.schedules tr[data-schedule="ticks/daily"]');
  const state = daily.locator('[data-state]');
  const pauseState = async () => (await call(server, '/api/v1/schedules')).body.schedules
    .find((s) => s.workflow === 'ticks' && s.name === 'daily');
  await daily.waitFor();
  assert.equal(await state.textContent(), 'enabled');
  assert.equal((await pauseState()).paused, false);
  const reason = `maintenance window ${suffix}`;
  const pauseUrl = await submitTwice(daily.locator('[data-schedule-pause]'), reason);
  assert.equal(pauseUrl, `${server.base}/api/v1/schedules/ticks/daily/pause`);
  await state.locator('[data-paused]').waitFor();
  assert.equal(await state.locator('[data-paused]').textContent(), `paused by ${BY}: ${reason}`);
  assert.equal(await daily.locator('[data-schedule-pause]').count(), 0, 'no pause button on a paused schedule');
  assert.equal(await daily.locator('[data-next]').innerText(), 'none while paused');
  // Nothing is appended to a run: the dialog's button says what it does.
  assert.equal(await page.locator('#action-dialog [data-submit]').textContent(), 'Pause');
  const paused = await pauseState();
  assert.equal(paused.paused, true);
  assert.deepEqual([paused.pause.by, paused.pause.reason], [BY, reason]);
  await shot('schedules-paused');

  const resumeUrl = await submitTwice(daily.locator('[data-schedule-resume]'), 'maintenance over');
  assert.equal(resumeUrl, `${server.base}/api/v1/schedules/ticks/daily/resume`);
  await daily.locator('[data-schedule-pause]').waitFor();
  assert.equal(await state.textContent(), 'enabled');
  assert.match(await daily.locator('[data-next]').innerText(), /^\d{4}-\d\d-\d\d 04:30:00 Europe\/Paris\n/);
  assert.equal(await page.locator('#action-dialog [data-submit]').textContent(), 'Resume');
  const resumed = await pauseState();
  assert.equal(resumed.paused, false);
  assert.deepEqual([resumed.pause.by, resumed.pause.reason], [BY, 'maintenance over']);
  assert.deepEqual(page.errors, []);
});
