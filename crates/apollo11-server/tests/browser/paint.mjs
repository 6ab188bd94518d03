// Time to first paint of a run page of 1,000 steps (and ~10,000 events), in a real Chromium
// against a real `apollo11 serve` (`cargo xtask ui --paint` starts one): runs `thousand`,
// then opens its page SAMPLES times, each in a fresh browser context, and prints JSON:
// first-contentful-paint, the graph drawn (1,000 nodes with their states), every event
// loaded (the slider usable), each as median, min and max in ms from navigation start.
//
//   node paint.mjs http://127.0.0.1:PORT

import { launch, settledRun, target } from './common.mjs';

const SAMPLES = 5;
const server = target();

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (v) => Math.round(v * 10) / 10;
  return { median: round(sorted[Math.floor(sorted.length / 2)]), min: round(sorted[0]), max: round(sorted.at(-1)) };
}

/** One page load: the three instants, in ms since navigation start. */
async function sample(browser, runId) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  if (server.token) await context.addInitScript((token) => sessionStorage.setItem('apollo11.token', token), server.token);
  const page = await context.newPage();
  await page.goto(`${server.base}/#/runs/${runId}`);
  const dag = await (await page.waitForFunction(
    () => document.querySelectorAll('svg.dag g.node.st-succeeded').length === 1000 && performance.now(),
    null, { polling: 'raf', timeout: 60_000 })).jsonValue();
  const events = await (await page.waitForFunction(
    () => !document.querySelector('.travel input[type=range]').disabled && performance.now(),
    null, { polling: 'raf', timeout: 60_000 })).jsonValue();
  const fcp = await page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null);
  await context.close();
  return { fcp, dag, events };
}

const run = await settledRun(server, 'thousand', `paint-${Date.now().toString(36)}`);
const browser = await launch();
try {
  const samples = [];
  for (let i = 0; i < SAMPLES; i++) samples.push(await sample(browser, run.run_id));
  console.log(JSON.stringify({
    scenario: 'ui_run_page_paint',
    steps: Object.keys(run.steps).length,
    events: run.events,
    samples: SAMPLES,
    first_contentful_paint_ms: stats(samples.map((s) => s.fcp)),
    graph_drawn_ms: stats(samples.map((s) => s.dag)),
    events_loaded_ms: stats(samples.map((s) => s.events)),
  }, null, 2));
} finally {
  await browser.close();
}
