// What the browser test and the paint measure share: the server's address, its token, the
// API from node, Chromium, and starting a run and waiting for it to settle.

import { chromium } from 'playwright-core';

/** The value of the `quoted` workflow's secret (workflows.mjs): never in an answer or a page. */
export const SECRET = 'never-shown-4b1d9e07';

/** The server under test (the first argument) and its token (`APOLLO11_UI_TOKEN`, optional). */
export function target() {
  const base = process.argv[2];
  if (!base || !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(base)) {
    console.error(`usage: node ${process.argv[1]} http://127.0.0.1:PORT  (a loopback apollo11 serve; APOLLO11_UI_TOKEN if it has --token-file)`);
    process.exit(2);
  }
  return { base, token: process.env.APOLLO11_UI_TOKEN ?? null };
}

/** A JSON call to the API: `{status, body}`. */
export async function call({ base, token }, path, { method = 'GET', body } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/**
 * Starts `workflow` as run `runId` with `params` (none: the defaults) and waits (at most
 * `seconds`) until it is not running.
 */
export async function settledRun(server, workflow, runId, seconds = 300, params = undefined) {
  const started = await call(server, '/api/v1/runs', { method: 'POST', body: { workflow, run_id: runId, params } });
  if (started.status !== 201) throw new Error(`starting ${workflow}: ${started.status} ${JSON.stringify(started.body)}`);
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const { body } = await call(server, `/api/v1/runs/${runId}`);
    if (body.state !== 'running') return body;
    if (Date.now() > deadline) throw new Error(`run ${runId} still running after ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Debian's Chromium (or `CHROMIUM`), headless, with `args` added to its command line. */
export function launch(args = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage', ...args],
  });
}

/** A page that collects its script errors in `page.errors`. */
export async function openPage(browser, server) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.errors = errors;
  return page;
}

/**
 * Goes to `hash`; on the first visit to a server with a token, waits for the UI to ask for it
 * and answers (the tab keeps it after).
 */
export async function visit(page, server, hash) {
  await page.goto(`${server.base}/${hash}`);
  if (!server.token || page.tokenGiven) return;
  page.tokenGiven = true;
  const input = page.locator('#token-dialog input');
  await input.waitFor({ state: 'visible' });
  await input.fill(server.token);
  await page.locator('#token-dialog button').click();
}
